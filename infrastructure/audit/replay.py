"""Replaying a session for audit: the active window as it stood at a version or a time, which
summary stood in for which archived events, and what the model saw when an event was produced.

Everything here is rebuilt from the ledger records alone with `domain.replay.replay`; nothing
reads the stored window. A compaction record lists the positions it archived, and the synthetic
events it added are the event records written with its version, so every summary in a window
can be traced back through earlier summaries to the original events it replaces.

`replay` and `what_the_model_saw` read every record of the session; `window_at` and
`model_view_at` (the audit page's) read only the records the window is made of, from the last
compaction or rewind at or before the version on (`domain.replay.window_start`), so that their
cost follows the window, not the session's length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sessionledger.domain.audit_port import AuditLedger, AuditSnapshot
from sessionledger.domain.errors import SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.prompting import build_system_prompt, facts_block, latest_summary
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.replay import replay as replay_records
from sessionledger.domain.replay import window_start
from sessionledger.domain.times import in_utc
from sessionledger.infrastructure.service import SessionService

CHUNK = 256
"""Records read at a time walking to a window's last compaction or rewind, or to an event."""


@dataclass(frozen=True, slots=True)
class StandIn:
    """Summary events in the window and the archived events they stand in for.

    `archived` is what the compaction that wrote the summaries archived (possibly an earlier
    summary); `covers` the original, non-synthetic events behind them, through earlier summaries.
    """

    compaction: int
    version: int
    source: str
    summaries: tuple[int, ...]
    archived: tuple[int, ...]
    covers: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "compaction": self.compaction,
            "version": self.version,
            "source": self.source,
            "summaries": list(self.summaries),
            "archived": list(self.archived),
            "covers": list(self.covers),
        }


@dataclass(frozen=True, slots=True)
class WindowReplay:
    """A session's active window as the ledger says it stood at `version`.

    `complete`: replayed from the session's first record. A replay from a compaction or rewind
    (`window_at`) gives the window, its positions, the version and the stand-ins' compaction,
    summaries and archived events as a complete one does; the state, the archived and hidden
    events, and what the stand-ins cover through earlier summaries are not known then (empty).
    """

    session_id: str
    version: int
    window: tuple[SessionEvent, ...]
    positions: tuple[int, ...]
    state: Mapping[str, Any]
    archived: tuple[int, ...]
    hidden: tuple[int, ...]
    stand_ins: tuple[StandIn, ...]
    deleted: bool
    complete: bool = True


@dataclass(frozen=True, slots=True)
class ModelView:
    """What was in force when `event` was produced: the window before it, and the summary that
    `domain.prompting` injects as a fact into the system prompt (`None` when there was none)."""

    event: SessionEvent
    before: WindowReplay
    summary: str | None
    facts: str | None
    system_prompt: str


def replay(
    service: SessionService,
    session_id: str,
    *,
    version: int | None = None,
    at: datetime | None = None,
    user_id: str | None = None,
) -> WindowReplay:
    """The window at `version` (an `event_version`) or at time `at` (records recorded by then).

    `SessionNotFound` for a session without records (with `user_id`: unless that user owns it);
    `ValueError` for a version outside 0..latest, a naive `at`, or both given.
    """
    if version is not None and at is not None:
        raise ValueError("give a version or a time, not both")
    if at is not None and (at.tzinfo is None or at.utcoffset() is None):
        raise ValueError("the time must be timezone-aware")
    if at is not None:
        in_utc(at, "the time")
    records = service.records(session_id, user_id=user_id)
    if not records:
        raise SessionNotFound(f"session {session_id!r} not found")
    latest = records[-1].version
    if version is not None and not 0 <= version <= latest:
        raise ValueError(f"version {version} is outside 0..{latest}, the versions of session {session_id!r}")
    return _replay(records, version, at)


def what_the_model_saw(
    service: SessionService,
    session_id: str,
    event_id: str,
    *,
    base_prompt: str = "",
    user_id: str | None = None,
) -> ModelView:
    """The window and injected summary in force when that event was produced (just before its version).

    `LookupError` when the session has no such event (with `user_id`: when that user does not
    own the session either), or when it was erased with its session.
    """
    records = service.records(session_id, user_id=user_id)
    target = next((r for r in records if r.kind is Kind.EVENT and r.event_id == event_id), None)
    target = _readable(target, session_id, event_id)
    return _model_view(target, _replay(records, target.version - 1, None), base_prompt)


def window_at(ledger: AuditLedger, session_id: str, version: int | None = None) -> WindowReplay:
    """`replay`'s window at `version` (default: now), read from the last compaction or rewind at or
    before it on (`WindowReplay.complete` says whether that is the first record), in one snapshot.

    `SessionNotFound` for a session without records (the caller checks who may read it);
    `ValueError` for a version outside 0..latest.
    """
    with ledger.audit_snapshot() as snapshot:
        last = snapshot.last_positions([session_id]).get(session_id)
        if last is None:
            raise SessionNotFound(f"session {session_id!r} not found")
        latest = _version_of(snapshot, session_id, last)
        if version is None:
            version = latest
        if not 0 <= version <= latest:
            raise ValueError(
                f"version {version} is outside 0..{latest}, the versions of session {session_id!r}"
            )
        upto = last if version == latest else _last_at(snapshot, session_id, version, last)
        return _replay_from_start(snapshot, session_id, upto, version)


def model_view_at(ledger: AuditLedger, session_id: str, event_id: str, base_prompt: str = "") -> ModelView:
    """`what_the_model_saw`, its window replayed as `window_at` does: reading the event's records
    from either end of the session until it is found, then the window's records before it.
    `LookupError` as `what_the_model_saw` says it (the caller checks who may read it)."""
    with ledger.audit_snapshot() as snapshot:
        last = snapshot.last_positions([session_id]).get(session_id, 0)
        target = _readable(_find_event(snapshot, session_id, event_id, last), session_id, event_id)
        before = _replay_from_start(snapshot, session_id, target.position - 1, target.version - 1)
    return _model_view(target, before, base_prompt)


def _readable(target: LedgerRecord | None, session_id: str, event_id: str) -> LedgerRecord:
    if target is None:
        raise LookupError(f"event {event_id!r} is not in the ledger of session {session_id!r}")
    if target.payload is None:
        raise LookupError(f"event {event_id!r} of session {session_id!r} was erased with its session")
    return target


def _model_view(target: LedgerRecord, before: WindowReplay, base_prompt: str) -> ModelView:
    summary = latest_summary(before.window)
    return ModelView(
        event=target.event(),
        before=before,
        summary=summary,
        facts=None if summary is None else facts_block(target.session_id, summary),
        system_prompt=build_system_prompt(base_prompt, target.session_id, before.window),
    )


def _version_of(snapshot: AuditSnapshot, session_id: str, position: int) -> int:
    return snapshot.records(session_id, position - 1, position).records[0].version


def _last_at(snapshot: AuditSnapshot, session_id: str, version: int, last: int) -> int:
    """The last position whose record's version is at most `version` (versions grow with
    positions), by bisection: a record read per step."""
    low, high = 0, last
    while low < high:
        middle = (low + high + 1) // 2
        if _version_of(snapshot, session_id, middle) <= version:
            low = middle
        else:
            high = middle - 1
    return low


def _find_event(snapshot: AuditSnapshot, session_id: str, event_id: str, last: int) -> LedgerRecord | None:
    """The event record, read a chunk at a time from the newest and the oldest end in turn (the
    replies people open are mostly recent or early), stopping where it is found."""
    newest, oldest = last, 0
    while oldest < newest:
        ends = [(max(oldest, newest - CHUNK), newest)]
        newest = ends[0][0]
        if oldest < newest:
            ends.append((oldest, min(newest, oldest + CHUNK)))
            oldest = ends[1][1]
        for after, upto in ends:
            for record in snapshot.records(session_id, after, upto).records:
                if record.kind is Kind.EVENT and record.event_id == event_id:
                    return record
    return None


def _replay_from_start(snapshot: AuditSnapshot, session_id: str, upto: int, version: int) -> WindowReplay:
    """The window at `version` from the records up to position `upto` (the last of that version):
    walking back a chunk at a time to the last compaction or rewind, then reading the records its
    window names and those after its base (`domain.replay.window_start`)."""
    read: list[LedgerRecord] = []
    start: LedgerRecord | None = None
    high = upto
    while high > 0 and start is None:
        low = max(0, high - CHUNK)
        chunk = snapshot.records(session_id, low, high).records
        read[:0] = chunk
        start = next((r for r in reversed(chunk) if r.version <= version and window_start(r)), None)
        high = low
    if start is None:
        if not read:
            raise SessionNotFound(f"session {session_id!r} not found")
        return _replay(read, version, None)
    shape = window_start(start)
    assert shape is not None  # it was found by it
    first = read[0].position
    named = set(shape.prefix)
    needed = {r.position: r for r in read if r.position > shape.base or r.position in named or r is start}
    if shape.base + 1 < first:
        needed.update((r.position, r) for r in snapshot.records(session_id, shape.base, first - 1).records)
    for after, upto_run in _runs(sorted(p for p in named if p < first and p <= shape.base)):
        needed.update((r.position, r) for r in snapshot.records(session_id, after, upto_run).records)
    found = _replay([needed[p] for p in sorted(needed)], version, None)
    return replace(
        found,
        state={},
        archived=(),
        hidden=(),
        stand_ins=tuple(replace(s, covers=()) for s in found.stand_ins),
        complete=False,
    )


def _runs(positions: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted positions as `(after, upto)` ranges of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for position in positions:
        if runs and runs[-1][1] == position - 1:
            runs[-1] = (runs[-1][0], position)
        else:
            runs.append((position - 1, position))
    return runs


def _replay(records: Sequence[LedgerRecord], version: int | None, at: datetime | None) -> WindowReplay:
    projection = replay_records(records, upto_version=version, at=at)
    return WindowReplay(
        session_id=records[0].session_id,
        version=projection.version,
        window=projection.window,
        positions=projection.window_positions,
        state=projection.session_state,
        archived=projection.archived_positions,
        hidden=projection.hidden,
        stand_ins=stand_ins(records, projection.version, projection.window_positions),
        deleted=projection.deleted,
    )


def stand_ins(records: Sequence[LedgerRecord], version: int, window: Sequence[int]) -> tuple[StandIn, ...]:
    """For each compaction up to `version` whose summaries are in `window`: what they stand in for."""
    added: dict[int, list[int]] = {}  # version -> event positions written with it
    compactions: list[LedgerRecord] = []
    synthetic: set[int] = set()
    for record in records:
        if record.version > version:
            break
        if record.kind is Kind.EVENT:
            added.setdefault(record.version, []).append(record.position)
            if record.synthetic:
                synthetic.add(record.position)
        elif record.kind is Kind.COMPACTION and record.payload is not None:
            compactions.append(record)
    written_by = {p: c for c in compactions for p in added.get(c.version, ()) if p < c.position}

    def originals(positions: Sequence[int], seen: set[int]) -> list[int]:
        found: list[int] = []
        for p in positions:
            origin = written_by.get(p)
            if p in synthetic and origin is not None and origin.position not in seen:
                seen.add(origin.position)
                found += originals(origin.payload["archived"], seen)  # type: ignore[index]  # compactions keep payloads
            elif p not in synthetic:
                found.append(p)
        return found

    in_window = set(window)
    result = []
    for compaction in compactions:
        summaries = [
            p for p in added.get(compaction.version, ()) if p < compaction.position and p in in_window
        ]
        if not summaries:
            continue
        payload = compaction.payload or {}
        result.append(
            StandIn(
                compaction=compaction.position,
                version=compaction.version,
                source=str(payload.get("source", "")),
                summaries=tuple(summaries),
                archived=tuple(payload["archived"]),
                covers=tuple(sorted(set(originals(payload["archived"], {compaction.position})))),
            )
        )
    return tuple(result)
