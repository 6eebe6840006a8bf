"""`sessionledger demo`: the main job on the embedded default, end to end, shown as tables.

Real ShareGPT conversations are appended as an application appends them, here on SQLite, and
compacted in the background by the in-process compactor (`open_service(compaction="background")`:
the workers' evaluate and compact on a thread, no broker); then every session's ledger, window,
summaries and tokens are shown, and the commands that look at what it stored. It says first what it
will do, and fits an 80-column terminal.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from sessionledger.domain import format_event
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    command,
    console,
    emit_json,
    errors,
    fail,
    settings_for,
)

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table
    from sessionledger.domain.ports import AccessTokens
    from sessionledger.infrastructure import SessionService

DEMO_APP = "sharegpt-demo"
DEMO_USER = "demo-user"
MAX_TURNS, MAX_TOKENS, KEPT = 4, 3000, 4
DEMO_POLICY = f"""
[apps.{DEMO_APP}]
trigger = {{ type = "any_of", triggers = [ {{ type = "turns", max_turns = {MAX_TURNS} }},
                                           {{ type = "tokens", threshold = {MAX_TOKENS} }} ] }}
strategy = {{ type = "recursive", max_events_to_keep = {KEPT}, overlap_size = 1 }}
"""
"""Compact early so that a short demo shows it."""
POLICY_IN_ONE_LINE = (
    f"past {MAX_TURNS} turns or {MAX_TOKENS:,} tokens, all but the last {KEPT} events are summarized"
)


@dataclass(frozen=True)
class SessionReport:
    session_id: str
    events: int
    window: int
    summaries: int
    tokens_before: int
    tokens_after: int

    @property
    def saved(self) -> float:
        return 1 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0


@command
def demo(
    count: Annotated[int, typer.Option("--conversations", "-n", help="How many conversations.")] = 100,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Publish real conversations, compact them in the background, and show the result."""
    # imported here, not with the module: every command registers this one, and the openai
    # client, the compaction modules and the data set would add a second to each command's start
    from uuid import uuid4

    from rich.markup import escape
    from sessionledger.infrastructure.background_compaction import compact_in_background
    from sessionledger.infrastructure.bootstrap import open_storage
    from sessionledger.infrastructure.policies import load_policies
    from sessionledger.infrastructure.sharegpt import conversations
    from sessionledger.infrastructure.summarizers.factory import summarizer_from_settings
    from sessionledger.workers.telemetry import configure_tracing

    if count <= 0:
        fail("--conversations must be greater than 0")
    if broker_url:
        errors.print("note: the demo compacts in its own process; --broker-url is not used")
    settings = settings_for(database_url)
    configure_tracing(settings, "demo")
    url = hide_passwords(settings.database_url)  # shown, never used to connect
    summarizer = summarizer_from_settings(settings)
    policies = load_policies(lambda: summarizer, inline=DEMO_POLICY, model=settings.model)
    run = uuid4().hex[:8]
    quiet = as_json
    if not quiet:
        console.print(f"ledger: [bold]{escape(_describe(url))}[/]", markup=True)
        console.print(f"summarizer: [bold]{escape(_describe_summarizer(summarizer))}[/]", markup=True)
        console.print(f"appending {count:,} ShareGPT conversations as user {DEMO_USER}, app {DEMO_APP}")
        console.print(f"policy: {POLICY_IN_ONE_LINE}")
    started = time.perf_counter()
    with open_storage(settings, index_text=True) as storage:
        service = storage.service
        compactor = compact_in_background(service, storage.leases, policies)
        loaded = list(conversations(limit=count))
        total = sum(len(c.messages) for c in loaded)
        session_ids = [
            service.create_session(DEMO_USER, session_id=f"{c.id}-{run}", app_name=DEMO_APP, ttl=None).id
            for c in loaded
        ]
        with _progress(quiet) as progress:
            appending = progress.add_task("appending, compacted in the background", total=total)
            append_started = time.perf_counter()
            for session_id, conversation in zip(session_ids, loaded, strict=True):
                for message in conversation.messages:
                    service.append_message(session_id, message)
                progress.advance(appending, len(conversation.messages))
            published_in = time.perf_counter() - append_started
            settling = progress.add_task("evaluate, compact in the background", total=None)
            if not compactor.wait_idle(timeout=300):
                fail("the background compaction did not settle within 300 s", status=1)
            progress.update(settling, total=1, completed=1)
        reports = [_report(service, sid, settings.model) for sid in session_ids]
        elapsed = time.perf_counter() - started
        if as_json:
            emit_json(_as_json(reports, url, published_in, elapsed))
            return
        _show(service, reports, total, published_in, elapsed, url, _audit_token(storage.access_tokens))


def _progress(quiet: bool) -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )


def _report(service: SessionService, session_id: str, model: str) -> SessionReport:
    from sessionledger.domain import EventFilter
    from sessionledger.infrastructure.tokens import count_chat_tokens

    real = service.get_events(session_id, EventFilter.real_only())
    window = service.get_events(session_id, EventFilter.active())
    summaries = sum(1 for e in service.get_events(session_id) if e.is_synthetic and e.message.text)
    return SessionReport(
        session_id=session_id,
        events=len(real),
        window=len(window),
        summaries=summaries // 2,
        tokens_before=count_chat_tokens([e.message for e in real], model),
        tokens_after=count_chat_tokens([e.message for e in window], model),
    )


def _show(
    service: SessionService,
    reports: list[SessionReport],
    total: int,
    published_in: float,
    elapsed: float,
    url: str,
    token: str,
) -> None:
    from rich.table import Table
    from sessionledger.domain import EventFilter

    console.print(_sessions_table(reports, console.width))
    compacted = max(reports, key=lambda r: (r.summaries, r.tokens_before))
    window = Table(
        "#", "", "event", title=f"active window of {compacted.session_id} (what the model sees next)"
    )
    for index, event in enumerate(service.get_events(compacted.session_id, EventFilter.active()), start=1):
        text = format_event(event).replace("\n", " ")
        window.add_row(
            str(index),
            "summary" if event.is_synthetic else "",
            text if len(text) <= 140 else text[:137] + "...",
        )
    console.print(window)
    console.print(
        f"{total:,} events appended in {published_in * 1000:.0f} ms "
        f"({total / published_in:,.0f} events/s, each stored before the next, compaction running "
        f"beside them); all compacted {elapsed:.1f} s after the start."
    )
    _show_next_steps(url, compacted.session_id, token)


def _sessions_table(reports: list[SessionReport], width: int) -> Table:
    """The largest sessions, each column exactly as wide as its widest value and header (or, when
    that is wider than `width`, its widest value and header word), so rich never has to shorten
    a session id to make the table fit."""
    from rich.table import Table

    before = sum(r.tokens_before for r in reports)
    after = sum(r.tokens_after for r in reports)
    largest = sorted(reports, key=lambda r: r.tokens_before, reverse=True)[:15]
    columns = {
        "session": ([r.session_id for r in largest], f"{len(reports)} sessions"),
        "events": ([str(r.events) for r in largest], str(sum(r.events for r in reports))),
        "in window": ([str(r.window) for r in largest], str(sum(r.window for r in reports))),
        "summaries": ([str(r.summaries) for r in largest], str(sum(r.summaries for r in reports))),
        "tokens before": ([f"{r.tokens_before:,}" for r in largest], f"{before:,}"),
        "tokens after": ([f"{r.tokens_after:,}" for r in largest], f"{after:,}"),
        "saved": ([f"{r.saved:.0%}" for r in largest], f"{1 - after / before:.0%}" if before else "-"),
    }
    values = {header: max(len(footer), *map(len, cells)) for header, (cells, footer) in columns.items()}
    widths = {header: max(value, len(header)) for header, value in values.items()}
    between = 3 * (len(columns) - 1)  # the table below: no edges, a space on each side of a separator
    if sum(widths.values()) + between > width:
        widths = {header: max(value, *map(len, header.split())) for header, value in values.items()}
    table = Table(title="sessions (largest 15)", show_footer=True, show_edge=False, pad_edge=False)
    for header, (_, footer) in columns.items():
        session = header == "session"
        table.add_column(
            header,
            footer=footer,
            width=widths[header],
            no_wrap=session,
            justify="left" if session else "right",
        )
    for row in zip(*(cells for cells, _ in columns.values()), strict=True):
        table.add_row(*row)
    return table


def _audit_token(tokens: AccessTokens) -> str:
    """A token for the demo user's audit page (`serve`), stored hashed like any other."""
    from datetime import UTC, datetime

    from sessionledger.domain.access import Grant, issue

    token, stored = issue(Grant(DEMO_USER), datetime.now(UTC))
    tokens.add(stored)
    return token


def _show_next_steps(url: str, session_id: str, token: str) -> None:
    """The commands that look at what the demo stored, ready to paste (no activated environment needed)."""
    from sessionledger.infrastructure.settings import MEMORY_URL

    if url == MEMORY_URL:
        console.print("The ledger was in memory: nothing of it is left to look at.")
        return
    database = "--database-url " + shlex.quote(hide_passwords(url))
    commands = [
        ["sessions", "--user", DEMO_USER, database],
        ["events", session_id, "--all", database],
        ["timeline", session_id, database],
        ["verify", database],
    ]
    console.print(f"\nLook at what it stored (user {DEMO_USER}):")
    for words in commands:
        for line in shell_lines([*program(), *words], console.width):
            console.print(line, highlight=False, soft_wrap=True)
    console.print(
        "\nOr in the browser: serve the audit page, open http://127.0.0.1:8080/ and log in with "
        f"this token of {DEMO_USER} (needs the web extra: pip install 'sessionledger[web]'):",
    )
    for line in shell_lines([*program(), "serve", database], console.width):
        console.print(line, highlight=False, soft_wrap=True)
    console.print(token, highlight=False, soft_wrap=True)


def program() -> list[str]:
    """How to run this command again from here: its name when that is what the PATH finds, else
    the path it was started with (`.venv/bin/sessionledger` after `make demo`), else this
    interpreter's `-m sessionledger`."""
    started = Path(sys.argv[0])
    if started.name != "sessionledger" or not started.exists():
        return [shlex.quote(sys.executable), "-m", "sessionledger"]
    found = shutil.which(started.name)
    if found is not None and Path(found).resolve() == started.resolve():
        return [started.name]
    return [shlex.quote(str(started))]


def shell_lines(words: Sequence[str], width: int, indent: str = "  ") -> list[str]:
    """`words` (each already quoted for the shell) as a command of lines no wider than `width`,
    each but the last continued with a backslash; a word is never cut, even when wider."""
    lines: list[str] = []
    line = indent + words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) + len(" \\") <= width:
            line += " " + word
        else:
            lines.append(line + " \\")
            line = indent * 3 + word
    return [*lines, line]


def _as_json(
    reports: list[SessionReport], url: str, published_in: float, elapsed: float
) -> dict[str, object]:
    return {
        "database_url": url,
        "published_seconds": round(published_in, 3),
        "elapsed_seconds": round(elapsed, 3),
        "sessions": [
            {
                "id": r.session_id,
                "events": r.events,
                "window": r.window,
                "summaries": r.summaries,
                "tokens_before": r.tokens_before,
                "tokens_after": r.tokens_after,
            }
            for r in reports
        ],
    }


def _describe(url: str) -> str:
    if url.startswith("sqlite:///"):
        return f"{Path(url.removeprefix('sqlite:///')).resolve()} (SQLite)"
    return url.split("@")[-1] if "@" in url else url


def _describe_summarizer(summarizer: object) -> str:
    name = type(summarizer).__name__
    if name == "ExtractiveSummarizer":
        return "offline extractive (an LLM with OPENAI_BASE_URL or OPENAI_API_KEY)"
    return f"{name} ({getattr(summarizer, 'model', '?')} at {getattr(summarizer, 'base_url', '?')})"
