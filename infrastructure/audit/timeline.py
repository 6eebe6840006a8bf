"""A session's history as people read it: one entry per ledger record, in ledger order.

Appends, compactions (with the events they archived and the summaries they wrote), rewinds (with
the events they hid) and the erasure that deleted the session, each with its position, version and
times. Built from the records alone, so it shows a deleted session's history without its content.
`timeline_page` describes a range of positions reading only those records and the few that their
descriptions name, so that a page of a long session costs what the page shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sessionledger.domain.audit_port import AuditLedger
from sessionledger.domain.codec import format_timestamp
from sessionledger.domain.errors import SessionNotFound
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.turns import format_event
from sessionledger.infrastructure.service import SessionService


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    position: int
    version: int
    kind: str
    occurred_at: datetime
    recorded_at: datetime | None
    event_id: str | None
    text: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "version": self.version,
            "kind": self.kind,
            "occurred_at": format_timestamp(self.occurred_at),
            "recorded_at": None if self.recorded_at is None else format_timestamp(self.recorded_at),
            "event_id": self.event_id,
            "text": self.text,
            "details": dict(self.details),
        }


def timeline(service: SessionService, session_id: str, *, user_id: str | None = None) -> list[TimelineEntry]:
    """Every record of the session, described; `SessionNotFound` when it has none (with
    `user_id`: unless that user owns it)."""
    records = service.records(session_id, user_id=user_id)
    if not records:
        raise SessionNotFound(f"session {session_id!r} not found")
    return _entries(records, records, event_ids=True)


@dataclass(frozen=True, slots=True)
class TimelinePage:
    """The entries of positions `after + 1` to `upto` (at most) of a session that has `last` records."""

    entries: list[TimelineEntry]
    last: int


def timeline_page(ledger: AuditLedger, session_id: str, after: int, upto: int) -> TimelinePage:
    """The entries `timeline` gives for the records at positions `after + 1` to `upto`, in one
    snapshot, but without the ids of the events a compaction archived or a rewind hid (their
    positions are there: `described_events` reads a page of them), so that a page reads besides
    its records only the window a compaction left, where its summaries are. `SessionNotFound`
    when the session has no records (the caller checks who may read it)."""
    with ledger.audit_snapshot() as snapshot:
        last = snapshot.last_positions([session_id]).get(session_id)
        if last is None:
            raise SessionNotFound(f"session {session_id!r} not found")
        shown = snapshot.records(session_id, after, upto).records
        named = [p for record in shown for p in _named(record)]
        earliest = min((p for p in named if p <= after), default=after + 1)
        context = snapshot.records(session_id, earliest - 1, after).records if earliest <= after else []
    return TimelinePage(_entries(shown, [*context, *shown], event_ids=False), last)


def session_length(ledger: AuditLedger, session_id: str) -> int:
    """How many records the session has (0: none, an unknown session), without reading them."""
    with ledger.audit_snapshot() as snapshot:
        return snapshot.last_positions([session_id]).get(session_id, 0)


def described_events(
    ledger: AuditLedger, session_id: str, positions: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """The event records at `positions` as people read them (position, id, type, text), reading
    the span they lie in; an erased one says so, a position holding no event is left out."""
    if not positions:
        return {}
    wanted = set(positions)
    with ledger.audit_snapshot() as snapshot:
        records = snapshot.records(session_id, min(wanted) - 1, max(wanted)).records
    return {
        r.position: {
            "position": r.position,
            "event_id": r.event_id,
            "type": r.event_type,
            "synthetic": r.synthetic,
            "text": "(erased)" if r.payload is None else format_event(r.event()),
        }
        for r in records
        if r.position in wanted and r.kind is Kind.EVENT
    }


def _named(record: LedgerRecord) -> list[int]:
    """The positions a compaction's description reads without event ids: the window it left (its
    summaries are the events of its version just before it)."""
    payload = record.payload
    return list(payload["window"]) if payload is not None and record.kind is Kind.COMPACTION else []


def _entries(
    shown: Sequence[LedgerRecord], known: Sequence[LedgerRecord], *, event_ids: bool
) -> list[TimelineEntry]:
    """The entries of `shown`, described with what `known` (which includes them) says; with
    `event_ids`, the ids of what compactions archived and rewinds hid (`known` holds them all)."""
    ids = {r.position: r.event_id for r in known if r.kind is Kind.EVENT} if event_ids else None
    same_version: dict[int, list[int]] = {}
    for record in known:
        if record.kind is Kind.EVENT:
            same_version.setdefault(record.version, []).append(record.position)
    return [_entry(record, ids, same_version) for record in shown]


def _entry(
    record: LedgerRecord,
    event_ids: Mapping[int, str | None] | None,
    same_version: Mapping[int, Sequence[int]],
) -> TimelineEntry:
    text, details = _describe(record, event_ids, same_version)
    return TimelineEntry(
        record.position,
        record.version,
        str(record.kind),
        record.occurred_at,
        record.recorded_at,
        record.event_id,
        text,
        details,
    )


def _describe(
    record: LedgerRecord,
    event_ids: Mapping[int, str | None] | None,
    same_version: Mapping[int, Sequence[int]],
) -> tuple[str, dict[str, Any]]:
    payload = record.payload
    if payload is None:
        return f"{record.kind} (erased)", {"erased": True}
    if record.kind is Kind.CREATED:
        return (
            f"session created for user {payload['user_id']} in app {payload['app_name']}",
            {"user_id": payload["user_id"], "app_name": payload["app_name"], "state": payload["state"]},
        )
    if record.kind is Kind.EVENT:
        return format_event(record.event()), {
            "type": record.event_type,
            "branch": record.branch,
            "synthetic": record.synthetic,
            "invocation_id": payload["invocation_id"],
            "state_delta": payload["state_delta"],
        }
    if record.kind is Kind.COMPACTION:
        summaries = [p for p in same_version.get(record.version, ()) if p < record.position]
        archived = payload["archived"]
        return (
            f"compaction ({payload['source']}): archived {len(archived)} events, window of "
            f"{len(payload['window'])}, {len(summaries)} summary events added",
            {
                "source": payload["source"],
                "archived": archived,
                **_ids("archived_event_ids", archived, event_ids),
                "window": payload["window"],
                "summaries": summaries,
                "read_head": payload["read_head"],
                "tokens_saved": payload["tokens_saved"],
            },
        )
    if record.kind is Kind.REWIND:
        hidden = payload["hidden"]
        return (
            f"rewind before invocation {payload['before_invocation_id']}: {len(hidden)} events hidden",
            {
                "before_invocation_id": payload["before_invocation_id"],
                "hidden": hidden,
                **_ids("hidden_event_ids", hidden, event_ids),
                "state_delta": payload["state_delta"],
            },
        )
    if record.kind is Kind.ENTRY:
        return f"{payload['type']} entry {payload['key']!r}", {"type": payload["type"], "key": payload["key"]}
    if record.kind is Kind.FORGOTTEN:
        what = "every type" if payload["type"] is None else payload["type"]
        keys = "" if payload["keys"] is None else f", {len(payload['keys'])} keys"
        return f"forgot entries of {what} under {payload['prefix']!r}{keys}", dict(payload)
    if record.kind is Kind.ERASURE:
        return f"session deleted ({payload['reason']}); its messages were erased", dict(payload)
    return str(record.kind), {}


def _ids(key: str, positions: Sequence[int], event_ids: Mapping[int, str | None] | None) -> dict[str, Any]:
    return {} if event_ids is None else {key: [event_ids.get(p) for p in positions]}
