"""The ledger's domain values as table rows and back, one mapping for every module that reads or
writes them (on a Core `Connection` or on the driver: rows of both have named columns)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessionledger.domain.records import LedgerRecord
from sessionledger.domain.sessions import Session, merge_state
from sessionledger.domain.window import WindowStats
from sessionledger.domain.write_plans import LedgerHead
from sessionledger.infrastructure.ledger.statements import STATS


def ledger_row(record: LedgerRecord, text: str | None, recorded_at: Any = None) -> dict[str, Any]:
    """A `ledger` row: the record, its payload's canonical text (`None`: erased), and when it was
    stored: the record's own `recorded_at` (its row hash covers it), else `recorded_at` (a
    restored record from before the ledger hashed that time)."""
    return {
        "session_id": record.session_id,
        "position": record.position,
        "version": record.version,
        "event_id": record.event_id,
        "kind": record.kind.value,
        "occurred_at": record.occurred_at,
        "recorded_at": recorded_at if record.recorded_at is None else record.recorded_at,
        "event_type": record.event_type,
        "branch": record.branch,
        "synthetic": record.synthetic,
        "payload": text,
        "token_count": record.token_count,
        "content_hash": record.content_hash,
        "prev_hash": record.prev_hash,
        "row_hash": record.row_hash,
    }


def session_row(session: Session, state: Mapping[str, Any], head: LedgerHead) -> dict[str, Any]:
    """A `sessions` row at `head` (the window columns keep their defaults)."""
    return {
        "id": session.id,
        "app_name": session.app_name,
        "user_id": session.user_id,
        "created_at": session.created_at,
        "expires_at": session.expires_at,
        "metadata": dict(session.metadata),
        "state": dict(state),
        "version": head.version,
        "head_position": head.position,
        "head_hash": head.hash,
    }


def session_of(row: Any) -> Session:
    """The `Session` of a `statements.SESSIONS` row: its metadata and merged state."""
    return Session(
        id=row.id,
        user_id=row.user_id,
        app_name=row.app_name,
        created_at=row.created_at,
        expires_at=row.expires_at,
        metadata=row.metadata,
        state=merge_state(row.state, row.app_state or {}, row.user_state or {}),
    )


def head_of(row: Any) -> LedgerHead:
    """The chain head of a row with the `sessions` head columns."""
    return LedgerHead(row.head_position, row.head_hash, row.version)


def stats_of(row: Any) -> WindowStats:
    """The window stats of a row with the `sessions` stats columns."""
    return WindowStats(*(getattr(row, name) for name in STATS))


def stats_columns(stats: WindowStats) -> dict[str, int]:
    """The `sessions` stats columns of `stats`."""
    return dict(zip(STATS, (stats.events, stats.turns, stats.bytes, stats.tokens, stats.uncounted,
                            stats.events_since_summary), strict=True))  # fmt: skip
