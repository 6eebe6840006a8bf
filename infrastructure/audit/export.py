"""Export a session's ledger as JSON lines, and import such an export into any backend.

The format is documented in docs/export-format.md: a header line (format, version, session, head)
then one line per ledger record with every field the hash chain covers. An import verifies the
whole chain against the header's head before writing anything, and refuses an existing session id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import count, pairwise
from typing import Any, TextIO

from sessionledger.domain.codec import ensure_json, event_from_payload, format_timestamp, parse_timestamp
from sessionledger.domain.entries import entry_row
from sessionledger.domain.errors import SessionNotFound
from sessionledger.domain.hashing import canonical, sha256_hex
from sessionledger.domain.json_text import read_json
from sessionledger.domain.records import ADAPTER_KINDS, Kind, LedgerRecord
from sessionledger.domain.replay import replay
from sessionledger.domain.restore import RestoredSession, restored_session
from sessionledger.infrastructure.audit.chain import ChainBreak, ChainHead, first_break
from sessionledger.infrastructure.service import SessionService

FORMAT = "sessionledger.export"
FORMAT_VERSION = 1
_HASH_FIELDS = ("content_hash", "prev_hash", "row_hash")
LINE_ALLOWANCE = 64 * 1024
"""Characters a record line may hold besides its payload: the record's own fields (ids of at most
255 characters, three hashes, two times, kind, type, branch), with room to spare."""


class TamperedExport(ValueError):
    """The export's records do not verify: its chain is broken where `found` says."""

    def __init__(self, found: ChainBreak) -> None:
        super().__init__(
            f"the export does not verify: {found.kind} at position {found.position}: {found.detail}"
        )
        self.found = found


@dataclass(frozen=True, slots=True)
class ImportedSession:
    session_id: str
    records: int
    version: int
    head_hash: str


def export_lines(service: SessionService, session_id: str, *, user_id: str | None = None) -> Iterator[str]:
    """The export, one JSON text per line (without the newline); `SessionNotFound` when unknown
    (with `user_id`: unless that user owns it).

    A deleted session exports its history without content: the erased payloads are `null`.
    """
    records = service.records(session_id, user_id=user_id)
    if not records:
        raise SessionNotFound(f"session {session_id!r} not found")
    last = records[-1]
    yield canonical(
        {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "session_id": session_id,
            "records": len(records),
            "version": last.version,
            "head_position": last.position,
            "head_hash": last.row_hash,
            "deleted": any(record.kind is Kind.ERASURE for record in records),
            "exported_at": format_timestamp(datetime.now(UTC)),
        }
    )
    for record in records:
        yield canonical(record_to_dict(record))


def record_to_dict(record: LedgerRecord) -> dict[str, Any]:
    return {
        "session_id": record.session_id,
        "position": record.position,
        "version": record.version,
        "kind": str(record.kind),
        "event_id": record.event_id,
        "occurred_at": format_timestamp(record.occurred_at),
        "recorded_at": None if record.recorded_at is None else format_timestamp(record.recorded_at),
        "event_type": record.event_type,
        "branch": record.branch,
        "synthetic": record.synthetic,
        "token_count": record.token_count,
        "payload": None if record.payload is None else dict(record.payload),
        "content_hash": record.content_hash,
        "prev_hash": record.prev_hash,
        "row_hash": record.row_hash,
    }


def import_lines(service: SessionService, lines: Iterable[str]) -> ImportedSession:
    """Rebuild a session from its export: parse, verify, then write it into the service's ledger.

    `TamperedExport` when the chain does not verify; `ValueError` for anything else wrong with
    the input (not an export, an unsupported version, malformed records, a deleted session, whose
    messages were erased, or a session id the ledger already has).
    """
    return restore_export(service, checked_export(lines))


@dataclass(frozen=True, slots=True)
class CheckedExport:
    """An export read and verified: all that is left to refuse it is the ledger's (an id it has)."""

    session: RestoredSession
    imported: ImportedSession


def checked_export(lines: Iterable[str]) -> CheckedExport:
    """Parse and verify an export without a ledger, so that bad input never opens (or creates) one."""
    header, records = read_export(lines)
    check_export(header, records)
    last = records[-1]
    imported = ImportedSession(header["session_id"], len(records), last.version, last.row_hash)
    return CheckedExport(restored_session(records), imported)


def restore_export(service: SessionService, checked: CheckedExport) -> ImportedSession:
    """Write a checked export into the service's ledger, all of it or (`ValueError`) none."""
    service.ledger.restore(checked.session)
    return checked.imported


def line_limit(max_payload_bytes: int) -> int:
    """The longest record line (in characters) an export of a ledger with this payload limit holds."""
    return max_payload_bytes + LINE_ALLOWANCE


def bounded_lines(stream: TextIO, limit: int) -> Iterator[str]:
    """The stream's lines, each read with at most `limit` characters held: `ValueError` at a longer
    one, so that an endless line (`/dev/zero`) costs `limit` characters of memory, not all there is."""
    for number in count(1):
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith("\n"):
            raise ValueError(
                f"line {number} is longer than {limit:,} characters, the most an export line holds "
                f"(the payload limit, max_payload_bytes, plus {LINE_ALLOWANCE:,} for the record's fields)"
            )
        yield line


def read_export(lines: Iterable[str]) -> tuple[dict[str, Any], list[LedgerRecord]]:
    """The header and the records, by position; `ValueError` naming the line of any problem."""
    numbered = ((n, line) for n, line in enumerate(lines, start=1) if line.strip())
    first = next(numbered, None)
    if first is None:
        raise ValueError("the export is empty")
    header = _json(*first)
    if header.get("format") != FORMAT:
        raise ValueError(f"line {first[0]}: not a sessionledger export (no format {FORMAT!r})")
    if header.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"unsupported export format_version {header.get('format_version')!r}")
    for name, kind in (("session_id", str), ("records", int), ("head_position", int), ("head_hash", str)):
        if not isinstance(header.get(name), kind):
            raise ValueError(f"line {first[0]}: the header's {name} is missing or not a {kind.__name__}")
    records = [_record(n, _json(n, line), header["session_id"]) for n, line in numbered]
    if len(records) != header["records"]:
        raise ValueError(
            f"the header announces {header['records']} records but the export has {len(records)}"
        )
    records.sort(key=lambda record: record.position)
    for before, after in pairwise(records):
        if before.position == after.position:
            raise ValueError(f"two records at position {after.position}: one of them was inserted")
    return header, records


def check_export(header: Mapping[str, Any], records: Sequence[LedgerRecord]) -> None:
    """Verify the chain against the header's head, then that the records replay into a session."""
    digests = [None if r.payload is None else sha256_hex(canonical(r.payload)) for r in records]
    found = first_break(records, digests, ChainHead(header["head_position"], header["head_hash"]))
    if found is not None:
        raise TamperedExport(found)
    if any(record.kind is Kind.ERASURE for record in records):
        raise ValueError(
            f"session {header['session_id']!r} was deleted: its messages were erased, nothing to import"
        )
    _check_payloads(records)


def _check_payloads(records: Sequence[LedgerRecord]) -> None:
    """What a chain cannot prove: that each payload has the shape the ledger writes."""
    if records[0].kind is not Kind.CREATED:
        raise ValueError("the export does not start with the session's created record")
    events = {r.position for r in records if r.kind is Kind.EVENT}
    for record in records:
        try:
            if record.kind is Kind.EVENT:
                event_from_payload(
                    record.session_id, record.event_id or "", record.payload or {}, validate=True
                )
            else:  # what an event's validation checks of its values, for the other payloads
                ensure_json(record.payload, "its payload")
            if record.kind in ADAPTER_KINDS and record.payload is not None:
                entry_row(record.position, record.occurred_at, record.kind, record.payload)
            if record.kind in (Kind.COMPACTION, Kind.REWIND):
                payload = record.payload or {}
                named = [*payload["window"], *payload.get("archived", ()), *payload.get("hidden", ())]
                if not all(isinstance(p, int) and p in events and p < record.position for p in named):
                    raise ValueError("it names a position that is not an earlier event")
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"record {record.position} ({record.kind}) is malformed: {error}") from None
    try:
        replay(records)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"the records do not replay: {error!r}") from None


def _json(number: int, line: str) -> dict[str, Any]:
    try:
        value = read_json(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"line {number}: not JSON ({error.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"line {number}: not a JSON object")
    return value


_OPTIONAL_TEXT = ("event_id", "event_type", "branch")


def _record(number: int, data: Mapping[str, Any], session_id: str) -> LedgerRecord:
    """One record line, its types checked; `ValueError` naming the line."""
    try:
        if data["session_id"] != session_id:
            raise ValueError(f"session {data['session_id']!r} is not the header's {session_id!r}")
        for name in ("position", "version"):
            if type(data[name]) is not int:
                raise ValueError(f"{name} is not an integer")
        for name in _OPTIONAL_TEXT:
            if data[name] is not None and not isinstance(data[name], str):
                raise ValueError(f"{name} is not a string or null")
        for name in _HASH_FIELDS:
            if not isinstance(data[name], str):
                raise ValueError(f"{name} is not a string")
        if type(data["synthetic"]) is not bool:
            raise ValueError("synthetic is not a boolean")
        if data["token_count"] is not None and type(data["token_count"]) is not int:
            raise ValueError("token_count is not an integer or null")
        if data["payload"] is not None and not isinstance(data["payload"], dict):
            raise ValueError("payload is not an object or null")
        return LedgerRecord(
            session_id=session_id,
            position=data["position"],
            version=data["version"],
            kind=Kind(data["kind"]),
            event_id=data["event_id"],
            occurred_at=parse_timestamp(data["occurred_at"]),
            payload=data["payload"],
            content_hash=data["content_hash"],
            prev_hash=data["prev_hash"],
            row_hash=data["row_hash"],
            event_type=data["event_type"],
            branch=data["branch"],
            synthetic=data["synthetic"],
            recorded_at=None if data["recorded_at"] is None else parse_timestamp(data["recorded_at"]),
            token_count=data["token_count"],
        )
    except KeyError as error:
        raise ValueError(f"line {number}: the field {error.args[0]!r} is missing") from None
    except (TypeError, ValueError) as error:
        raise ValueError(f"line {number}: {error}") from None
