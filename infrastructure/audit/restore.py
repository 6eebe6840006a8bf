"""Writing a verified session (its ledger records, as exported) into a ledger, as that ledger
would have stored it: the records verbatim, then the projection they replay to.

The `Ledger` port has no write path for records made elsewhere (appends always make new ones),
so this module writes each backend's storage itself: the SQL tables of docs/architecture.md
"The ledger" (one code path for PostgreSQL and SQLite), or `MemoryLedger`'s session log. The
projection comes from the domain rules: `domain.ledger.replay`, `WindowShape` and `window_stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import sqlalchemy as sa

from domain.codec import parse_timestamp
from domain.ledger import Kind, LedgerRecord, Projection, WindowShape, canonical, replay, window_stats
from domain.ports import Ledger, WindowStats
from domain.sessions import Session
from infrastructure.ledger.engine import WRITE
from infrastructure.ledger.memory import MemoryLedger, _SessionLog
from infrastructure.ledger.schema import ledger as ledger_table
from infrastructure.ledger.schema import sessions, window_slots
from infrastructure.ledger.sql import SqlLedger


@dataclass(frozen=True, slots=True)
class _Restored:
    """A session as its records define it: metadata, projection, window shape and stats."""

    session: Session
    records: Sequence[LedgerRecord]
    projection: Projection
    shape: WindowShape
    epoch: int
    stats: WindowStats

    @classmethod
    def of(cls, records: Sequence[LedgerRecord]) -> _Restored:
        created = records[0].payload or {}
        expires_at = created["expires_at"]
        session = Session(
            id=records[0].session_id,
            user_id=created["user_id"],
            app_name=created["app_name"],
            created_at=parse_timestamp(created["created_at"]),
            expires_at=None if expires_at is None else parse_timestamp(expires_at),
            metadata=created["metadata"],
        )
        shape, epoch = WindowShape(), 0
        for record in records:
            if record.kind is Kind.COMPACTION:
                shape.compact(record.payload or {})
                epoch += 1
            elif record.kind is Kind.REWIND:
                shape.rewind(record.payload or {}, record.position)
                epoch += 1
        projection = replay(records)
        counts = {record.position: record.token_count for record in records}
        stats = window_stats(
            (event, counts[p])
            for p, event in zip(projection.window_positions, projection.window, strict=True)
        )
        return cls(session, records, projection, shape, epoch, stats)


def restore(ledger: Ledger, records: Sequence[LedgerRecord]) -> None:
    """Store a live session's verified records; `ValueError` when the ledger has that session id."""
    restored = _Restored.of(records)
    if isinstance(ledger, SqlLedger):
        _restore_sql(ledger.engine, restored)
    elif isinstance(ledger, MemoryLedger):
        _restore_memory(ledger, restored)
    else:
        raise ValueError(f"cannot import into a {type(ledger).__name__}")


def _exists(session_id: str) -> ValueError:
    return ValueError(f"session {session_id!r} already exists (or existed and was deleted): not imported")


def _restore_sql(engine: sa.Engine, restored: _Restored) -> None:
    session, last = restored.session, restored.records[-1]
    stats = restored.stats
    now = datetime.now(UTC)
    slots = [
        {"session_id": session.id, "position": p, "ordinal": i, "rewound": False}
        for i, p in enumerate(restored.shape.prefix)
    ] + [
        {"session_id": session.id, "position": p, "ordinal": None, "rewound": True}
        for p in sorted(restored.shape.hidden)
    ]
    try:
        with engine.execution_options(**{WRITE: True}).begin() as conn:
            conn.execute(
                sessions.insert().values(
                    id=session.id,
                    app_name=session.app_name,
                    user_id=session.user_id,
                    created_at=session.created_at,
                    expires_at=session.expires_at,
                    metadata=dict(session.metadata),
                    state=dict(restored.projection.session_state),
                    version=last.version,
                    head_position=last.position,
                    head_hash=last.row_hash,
                    window_base=restored.shape.base,
                    window_epoch=restored.epoch,
                    window_events=stats.events,
                    window_turns=stats.turns,
                    window_bytes=stats.bytes,
                    window_tokens=stats.tokens,
                    window_uncounted=stats.uncounted,
                    events_since_summary=stats.events_since_summary,
                )
            )
            conn.execute(ledger_table.insert(), [_row(record, now) for record in restored.records])
            if slots:
                conn.execute(window_slots.insert(), slots)
    except sa.exc.IntegrityError:
        raise _exists(session.id) from None


def _row(record: LedgerRecord, now: datetime) -> dict[str, object]:
    return {
        "session_id": record.session_id,
        "position": record.position,
        "version": record.version,
        "event_id": record.event_id,
        "kind": str(record.kind),
        "occurred_at": record.occurred_at,
        "recorded_at": record.recorded_at or now,
        "event_type": record.event_type,
        "branch": record.branch,
        "synthetic": record.synthetic,
        "payload": None if record.payload is None else canonical(record.payload),
        "token_count": record.token_count,
        "content_hash": record.content_hash,
        "prev_hash": record.prev_hash,
        "row_hash": record.row_hash,
    }


def _restore_memory(ledger: MemoryLedger, restored: _Restored) -> None:
    """Builds the `MemoryLedger` session log its own methods would have built (private by design:
    the in-memory store has no other way in)."""
    session, records = restored.session, restored.records
    now = datetime.now(UTC)
    events = [r for r in records if r.kind is Kind.EVENT and r.payload is not None]
    with ledger._lock:
        if session.id in ledger._sessions:
            raise _exists(session.id)
        ledger._sessions[session.id] = _SessionLog(
            session=replace(session, state={}),
            state=dict(restored.projection.session_state),
            records=[
                replace(
                    r,
                    recorded_at=r.recorded_at or now,
                    global_position=next(ledger._global),
                    token_count=None,
                )
                for r in records
            ],
            events={r.position: r.event() for r in events},
            positions={r.event_id or "": r.position for r in events},
            token_counts={r.position: r.token_count for r in events if r.token_count is not None},
            shape=restored.shape,
            epoch=restored.epoch,
            version=records[-1].version,
            stats=restored.stats,
        )
