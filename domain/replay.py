"""Replay: a session's projection (window, archived and hidden events, state) rebuilt from its
records alone, as it stood at any version or time; the SQL and in-memory windows must equal it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.mappings import EMPTY, FrozenDict
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.sessions import split_state_delta
from sessionledger.domain.window import WindowShape


@dataclass(frozen=True, slots=True)
class Projection:
    """A session as its records say it stood: the window, archived and hidden events, and state.

    Erased events (a deleted session replayed to before its deletion) keep their positions in
    `window_positions`/`archived_positions` but have no event in `window`/`archived`.
    """

    window: tuple[SessionEvent, ...]
    archived: tuple[SessionEvent, ...]
    hidden: tuple[int, ...]
    session_state: FrozenDict
    version: int
    window_positions: tuple[int, ...]
    archived_positions: tuple[int, ...]
    deleted: bool = False
    shape: WindowShape = field(default_factory=WindowShape)
    """The window rule's state: prefix, base and hidden positions."""
    epoch: int = 0
    """The window epoch: how many compactions and rewinds replaced the window."""


@dataclass(slots=True)
class ReplayPart:
    """What a run of consecutive records adds to a replay: its events (by position), the session
    state its records set (in order: a later part's keys win), the records that shape the window
    (compactions and rewinds, in order), its last version, whether it holds the erasure, and
    whether it met a record past the replay's end (later parts then add nothing).

    `replay` is one part; `verify --jobs` replays a long session as parts read apart and folds
    them with `fold_parts`."""

    events: dict[int, LedgerRecord] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    shaping: list[tuple[int, Kind, Mapping[str, Any] | None]] = field(default_factory=list)
    version: int = 0
    deleted: bool = False
    ended: bool = False


def replay_part(
    records: Iterable[LedgerRecord], upto_version: int | None = None, at: datetime | None = None
) -> ReplayPart:
    """The part of a replay the records (consecutive, by position) make; see `replay`."""
    part = ReplayPart()
    state = part.state
    for record in records:
        if (upto_version is not None and record.version > upto_version) or (
            at is not None and (record.recorded_at or record.occurred_at) > at
        ):
            part.ended = True
            break
        part.version = record.version
        payload = record.payload
        if record.kind is Kind.CREATED:
            if payload is not None:
                state.update(split_state_delta(payload["state"]).session)
        elif record.kind is Kind.EVENT:
            part.events[record.position] = record
            if payload is not None:
                state.update(split_state_delta(payload["state_delta"]).session)
        elif record.kind in (Kind.COMPACTION, Kind.REWIND):
            part.shaping.append((record.position, record.kind, payload))
            if record.kind is Kind.REWIND and payload is not None:
                state.update(payload["state_delta"])
        elif record.kind is Kind.ERASURE:
            part.deleted = True
    return part


def fold_parts(parts: Iterable[ReplayPart]) -> ReplayPart:
    """The parts of consecutive runs of records, in order, as one part."""
    whole = ReplayPart()
    for part in parts:
        whole.events.update(part.events)
        whole.state.update(part.state)
        whole.shaping += part.shaping
        whole.version = part.version if part.version or part.events or part.shaping else whole.version
        whole.deleted |= part.deleted
        if part.ended:
            whole.ended = True
            break
    return whole


def window_shape(shaping: Iterable[tuple[int, Kind, Mapping[str, Any] | None]]) -> tuple[WindowShape, int]:
    """The window rule's state after the compactions and rewinds, and the window epoch."""
    shape = WindowShape()
    epoch = 0
    for position, kind, payload in shaping:
        epoch += 1
        if kind is Kind.COMPACTION:
            shape.compact(payload or {})
        elif payload is not None:  # a rewind erased with its session (the projection is empty then)
            shape.rewind(payload, position)
    return shape, epoch


def window_start(record: LedgerRecord) -> WindowShape | None:
    """The window rule's state a compaction or a readable rewind leaves (`None` for any other
    record): a replay may start from it.

    The window at any later version, until the next compaction or rewind, is its prefix, then the
    events after its base; and the events any earlier rewind hid all lie at or before that base (a
    compaction's base is the session's head it read, a rewind's its own position). So `replay` of
    that record, the records its prefix names and every record after its base gives the window,
    its positions and the version that `replay` of all the records gives; the state and the
    archived events it gives are those of the records read only.
    """
    if record.payload is None or record.kind not in (Kind.COMPACTION, Kind.REWIND):
        return None
    shape, _ = window_shape([(record.position, record.kind, record.payload)])
    return shape


def replay(
    records: Iterable[LedgerRecord], upto_version: int | None = None, at: datetime | None = None
) -> Projection:
    """Rebuild a session's projection from its records (by position) alone.

    `upto_version` keeps the records whose version is at most that; `at` those recorded (or,
    without a recording time, that occurred) at or before that moment.
    """
    part = replay_part(records, upto_version, at)
    shape, epoch = window_shape(part.shaping)
    version, events = part.version, part.events
    if part.deleted:
        hidden = tuple(sorted(shape.hidden))
        return Projection((), (), hidden, EMPTY, version, (), (), deleted=True, shape=shape, epoch=epoch)
    archived, window = shape.split(events)
    return Projection(
        window=_events(events, window, archived=False),
        archived=_events(events, archived, archived=True),
        hidden=tuple(sorted(shape.hidden)),
        session_state=FrozenDict(part.state),
        version=version,
        window_positions=tuple(window),
        archived_positions=tuple(archived),
        shape=shape,
        epoch=epoch,
    )


def _events(
    records: Mapping[int, LedgerRecord], positions: Iterable[int], archived: bool
) -> tuple[SessionEvent, ...]:
    return tuple(
        records[p].event(archived) for p in positions if p in records and records[p].payload is not None
    )
