"""Replaying a session for audit: the active window as it stood at a version or a time, which
summary stood in for which archived events, and what the model saw when an event was produced.

Everything here is rebuilt from the ledger records alone with `domain.replay.replay`; nothing
reads the stored window. A compaction record lists the positions it archived, and the synthetic
events it added are the event records written with its version, so every summary in a window
can be traced back through earlier summaries to the original events it replaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessionledger.domain.errors import SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.prompting import build_system_prompt, facts_block, latest_summary
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.replay import replay as replay_records
from sessionledger.domain.times import in_utc
from sessionledger.infrastructure.service import SessionService


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
    """A session's active window as the ledger says it stood at `version`."""

    session_id: str
    version: int
    window: tuple[SessionEvent, ...]
    positions: tuple[int, ...]
    state: Mapping[str, Any]
    archived: tuple[int, ...]
    hidden: tuple[int, ...]
    stand_ins: tuple[StandIn, ...]
    deleted: bool


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
    if target is None:
        raise LookupError(f"event {event_id!r} is not in the ledger of session {session_id!r}")
    if target.payload is None:
        raise LookupError(f"event {event_id!r} of session {session_id!r} was erased with its session")
    before = _replay(records, target.version - 1, None)
    summary = latest_summary(before.window)
    return ModelView(
        event=target.event(),
        before=before,
        summary=summary,
        facts=None if summary is None else facts_block(session_id, summary),
        system_prompt=build_system_prompt(base_prompt, session_id, before.window),
    )


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
