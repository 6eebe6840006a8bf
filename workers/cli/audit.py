"""Audit commands: `replay`, `verify`, `export`, `import` and `timeline` (docs/api.md "Command line").

`verify` exits 1 when a check fails, naming the first broken position and the kind of break;
`import` exits 1 when the export does not verify. Unknown sessions and bad arguments exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from sessionledger.domain import format_event
from sessionledger.domain.codec import event_document
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    OnBehalfOf,
    cli,
    command,
    console,
    emit_json,
    fail,
    reason,
    service_for,
    settings_for,
    shown_time,
    time_column,
    unknown_session,
)
from sessionledger.workers.cli.digests import PublicKey, read_digests

if TYPE_CHECKING:
    from sessionledger.domain.ports import Ledger
    from sessionledger.infrastructure.audit import ModelView, TimelineEntry, Verification, WindowReplay
    from sessionledger.infrastructure.audit.digest import Digest
    from sessionledger.infrastructure.service import SessionService

_TEXT_WIDTH = 160
_KIND_STYLES = {"created": "cyan", "compaction": "magenta", "rewind": "yellow", "erasure": "red"}


def _short(text: str, width: int = _TEXT_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _parse_time(text: str) -> datetime:
    from sessionledger.domain.codec import parse_timestamp

    try:
        moment = parse_timestamp(text.replace("Z", "+00:00"))
    except ValueError as error:
        fail(f"--at must be an ISO-8601 time with a timezone, e.g. 2026-01-31T12:00:00Z: {error}")
    return moment


@command
def replay(
    session_id: Annotated[str, typer.Argument(help="The session to replay.")],
    version: Annotated[int | None, typer.Option("--version", help="The event_version to stop at.")] = None,
    at: Annotated[str | None, typer.Option("--at", help="ISO-8601 time with timezone to stop at.")] = None,
    event: Annotated[
        str | None, typer.Option("--event", help="Show what the model saw when this event was produced.")
    ] = None,
    user: OnBehalfOf = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Rebuild the active window from the ledger alone, as it stood at a version or time."""
    if sum(option is not None for option in (version, at, event)) > 1:
        fail("give at most one of --version, --at and --event")
    moment = None if at is None else _parse_time(at)
    from sessionledger.infrastructure import audit

    with service_for(database_url, broker_url) as service:
        try:
            if event is not None:
                _show_model_view(audit.what_the_model_saw(service, session_id, event, user_id=user), as_json)
            else:
                found = audit.replay(service, session_id, version=version, at=moment, user_id=user)
                _show_replay(found, as_json)
        except LookupError as error:
            if not service.records(session_id, user_id=user):
                unknown_session(service, session_id, user)
            fail(reason(error))


def _replay_dict(found: WindowReplay) -> dict[str, Any]:
    return {
        "session_id": found.session_id,
        "version": found.version,
        "deleted": found.deleted,
        "window": [
            {"position": p, **event_document(e)} for p, e in zip(found.positions, found.window, strict=False)
        ],
        "state": dict(found.state),
        "archived": list(found.archived),
        "hidden": list(found.hidden),
        "stand_ins": [stand_in.as_dict() for stand_in in found.stand_ins],
    }


def _show_replay(found: WindowReplay, as_json: bool) -> None:
    if as_json:
        emit_json(_replay_dict(found))
        return
    if found.deleted:
        console.print(
            f"session {found.session_id} was deleted at version {found.version}: its messages were erased"
        )
        return
    _window_table(found, f"window of {found.session_id} at version {found.version}")


def _window_table(found: WindowReplay, title: str) -> None:
    from rich.table import Table

    summaries = {p: s for s in found.stand_ins for p in s.summaries}
    table = Table("position", time_column("time"), "event", "stands in for", title=title)
    for position, event in zip(found.positions, found.window, strict=False):
        stand_in = summaries.get(position)
        covers = (
            ""
            if stand_in is None
            else f"{len(stand_in.covers)} archived events (compaction @{stand_in.compaction})"
        )
        table.add_row(str(position), shown_time(event.timestamp), _short(format_event(event)), covers)
    console.print(table)
    console.print(
        f"archived: {len(found.archived)} events, rewound: {len(found.hidden)}, state: {dict(found.state)}",
    )


def _show_model_view(view: ModelView, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "event": event_document(view.event),
                "before": _replay_dict(view.before),
                "summary": view.summary,
                "facts": view.facts,
                "system_prompt": view.system_prompt,
            }
        )
        return
    _window_table(view.before, f"what the model saw before {view.event.id} (version {view.before.version})")
    console.print(f"produced: {_short(format_event(view.event))}")
    if view.facts is not None:
        console.print(f"injected summary (system prompt facts):\n{view.facts}")


@command
def verify(
    session_id: Annotated[
        str | None, typer.Argument(help="The session to check (all, or all of --user's, when omitted).")
    ] = None,
    user: OnBehalfOf = None,
    digest: Annotated[
        list[Path] | None,
        typer.Option("--digest", help="A digest the ledger must extend (repeatable); checks every session."),
    ] = None,
    since: Annotated[
        Path | None,
        typer.Option(
            "--since", help="A trusted digest: check only what was appended after it, and the link."
        ),
    ] = None,
    next_digest: Annotated[
        Path | None,
        typer.Option("--next-digest", help="With --since: write the digest of the ledger as verified now."),
    ] = None,
    all_heads: Annotated[
        bool,
        typer.Option(
            "--all-heads",
            help="With --since: also look up the head of every session the digest holds "
            "(finds a rewrite of a session nobody wrote to since; a lookup per session).",
        ),
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", min=1, help="Processes to spread sessions, and long sessions in ranges, over."
        ),
    ] = 1,
    public_key: PublicKey = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Check the hash chains and that each stored window equals the one replayed from the ledger."""
    from sessionledger.infrastructure.audit.parallel import check_jobs, verify_parallel

    check_jobs(jobs)
    if jobs > 1 and (digest or since):
        fail("--jobs goes with a plain verify (not --digest or --since)")
    if (digest or since) and (session_id is not None or user is not None):
        fail("--digest and --since check the whole ledger: give no session and no --user")
    if since is not None and digest:
        fail("give either --digest or --since")
    if next_digest is not None and since is None:
        fail("--next-digest goes with --since")
    if all_heads and since is None:
        fail("--all-heads goes with --since")
    digests = read_digests(digest or [], public_key)
    from sessionledger.infrastructure.audit.anchored import verify_against

    with service_for(database_url, broker_url) as service:
        if since is not None:
            results = _since(service.ledger, read_digests([since], public_key)[0], next_digest, all_heads)
        elif digests:
            results = list(verify_against(service, digests))
        elif session_id is not None:
            results = _one(service, session_id, user, jobs)
        elif user is not None:
            results = verify_parallel(service, jobs, [s.id for s in service.list_sessions(user)])
        else:
            results = verify_parallel(service, jobs)
        if as_json:
            emit_json(results[0].as_dict() if session_id is not None else [r.as_dict() for r in results])
        else:
            _verification_table(results)
        broken = [r for r in results if not r.ok]
        if broken:
            first = broken[0]
            more = f" (and {len(broken) - 1} more sessions)" if len(broken) > 1 else ""
            fail(f"session {first.session_id}: {_problem(first)}{more}", status=1)


def _one(service: SessionService, session_id: str, user: str | None, jobs: int) -> list[Verification]:
    from sessionledger.infrastructure import audit
    from sessionledger.infrastructure.audit.parallel import verify_parallel

    try:
        if jobs == 1:
            return [audit.verify(service, session_id, user_id=user)]
        if user is not None and service.get_session(session_id, user_id=user) is None:
            raise LookupError(session_id)
        results = verify_parallel(service, jobs, [session_id])
        if results[0].records == 0:
            raise LookupError(session_id)
    except LookupError:
        unknown_session(service, session_id, user)
    return results


def _since(ledger: Ledger, trusted: Digest, next_digest: Path | None, all_heads: bool) -> list[Verification]:
    """`verify --since`: the sessions written to since the digest (or broken), the rest counted."""
    from sessionledger.infrastructure.audit.digest import InvalidDigest, write_digest
    from sessionledger.infrastructure.audit.since import verify_since

    try:
        checked = verify_since(ledger, trusted, all_heads=all_heads)
    except InvalidDigest as error:
        fail(str(error), status=1)
    if next_digest is not None and checked.ok:
        try:
            write_digest(checked.next_digest, next_digest)
        except OSError as error:
            fail(f"cannot write {next_digest}: {error.strerror}")
    rest = "unchanged since" if all_heads else "not written to since"
    looked = "" if all_heads else " (--all-heads looks up their heads)"
    print(
        f"{checked.unchanged} sessions {rest} digest {trusted.name}{looked}; "
        f"{len(checked.results)} checked from it",
        file=sys.stderr,
    )
    return list(checked.results)


def _problem(result: Verification) -> str:
    first = result.first
    if first is None:
        return "ok"
    where = "" if first.position is None else f" at position {first.position}"
    return f"{first.kind}{where}: {first.detail}"


def _verification_table(results: Iterable[Verification]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table("session", "records", "version", "status", "detail", title="ledger verification")
    for result in results:
        status = Text("ok") if result.ok else Text(_problem(result).split(":", 1)[0], style="red")
        if result.deleted:
            status.append(" (deleted)")
        detail = "" if result.first is None else _short(result.first.detail, 100)
        table.add_row(result.session_id, str(result.records), str(result.version), status, detail)
    console.print(table)


@command
def export(
    session_id: Annotated[str, typer.Argument(help="The session to export.")],
    user: OnBehalfOf = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Write the session's ledger as JSON lines (docs/export-format.md) to standard output."""
    from sessionledger.infrastructure import audit

    with service_for(database_url, broker_url) as service:
        try:
            lines = audit.export_lines(service, session_id, user_id=user)
            first = next(lines)
        except LookupError:
            unknown_session(service, session_id, user)
        write = sys.stdout.write
        write(first + "\n")
        for line in lines:
            write(line + "\n")


@cli.command(name="import")
def import_(
    path: Annotated[Path, typer.Argument(help="An export file (JSON lines); '-' reads standard input.")],
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Rebuild a session from an export, after verifying its whole chain.

    The export is read and verified before the ledger is opened, each line within the payload
    limit plus the record's fields; an import that fails leaves the ledger as it was, and no new
    SQLite file behind."""
    from sessionledger.infrastructure.audit.export import (
        TamperedExport,
        bounded_lines,
        checked_export,
        line_limit,
        restore_export,
    )

    settings = settings_for(database_url, broker_url)
    try:
        stream = sys.stdin if str(path) == "-" else path.open(encoding="utf-8")
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror}")
    with stream:
        try:
            checked = checked_export(bounded_lines(stream, line_limit(settings.max_payload_bytes)))
        except TamperedExport as error:
            fail(str(error), status=1)
    with (
        _removed_if_new(settings.database_url),
        service_for(database_url, broker_url, create=True) as service,
    ):
        imported = restore_export(service, checked)
    if as_json:
        emit_json(
            {
                "session_id": imported.session_id,
                "records": imported.records,
                "version": imported.version,
                "head_hash": imported.head_hash,
            }
        )
        return
    console.print(
        f"imported session {imported.session_id}: {imported.records} records, version "
        f"{imported.version}, head {imported.head_hash}",
    )


@contextmanager
def _removed_if_new(database_url: str) -> Iterator[None]:
    """Remove the SQLite ledger the block creates if the block fails (with its WAL files), so that
    a failed import does not leave an empty ledger where there was none; an existing one is kept."""
    from sessionledger.infrastructure.bootstrap import sqlite_file

    path = sqlite_file(database_url)
    created = path is not None and not path.exists()
    try:
        yield
    except BaseException:
        if created and path is not None:
            for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                leftover.unlink(missing_ok=True)
        raise


@command
def timeline(
    session_id: Annotated[str, typer.Argument(help="The session whose history to show.")],
    user: OnBehalfOf = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """The session's whole history: versions, compactions and what they archived, rewinds, erasure."""
    from sessionledger.infrastructure import audit

    with service_for(database_url, broker_url) as service:
        try:
            entries = audit.timeline(service, session_id, user_id=user)
        except LookupError:
            unknown_session(service, session_id, user)
        if as_json:
            emit_json([entry.as_dict() for entry in entries])
            return
        _timeline_table(session_id, entries)


def _timeline_table(session_id: str, entries: list[TimelineEntry]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(
        "pos", "version", "kind", time_column("recorded"), "what happened", title=f"timeline of {session_id}"
    )
    for entry in entries:
        style = _KIND_STYLES.get(entry.kind)
        kind = Text(entry.kind, style=style or "")
        text = entry.text
        if entry.kind == "compaction":
            text += f"\n  archived positions {_positions(entry.details['archived'])}"
        elif entry.kind == "rewind" and "hidden" in entry.details:
            text += f"\n  hid positions {_positions(entry.details['hidden'])}"
        recorded = entry.recorded_at or entry.occurred_at
        table.add_row(str(entry.position), str(entry.version), kind, shown_time(recorded), _short(text))
    console.print(table)


def _positions(positions: list[int]) -> str:
    """`2-9, 13, 15-18`: runs of consecutive positions."""
    runs: list[str] = []
    start = prev = None
    for p in [*positions, None]:
        if p is not None and prev is not None and p == prev + 1:
            prev = p
            continue
        if start is not None:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = p
    return ", ".join(runs)
