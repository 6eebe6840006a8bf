"""Reading a session for audit, in one consistent snapshot of the audit port
(`domain.audit_port`): every ledger record, the digest of each payload as stored, the chain head
the session row names, and the projection the backend stores (its window given by the window's
shape and the session's event positions, as the ledger itself derives it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sessionledger.domain.audit_port import AuditLedger, StoredSession
from sessionledger.domain.codec import format_timestamp
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.window import WindowShape, WindowStats
from sessionledger.infrastructure.audit.chain import ChainHead


@dataclass(frozen=True, slots=True)
class StoredProjection:
    """What the backend stores for the session, at `version`: `None` fields once it is deleted.

    `session` holds the session row's own fields as the `created` record writes them; `window`
    the window's positions in order; `hidden` the rewound positions.
    """

    version: int
    session: Mapping[str, Any] | None
    state: Mapping[str, Any] | None
    window: tuple[int, ...] | None
    hidden: frozenset[int] | None
    stats: WindowStats | None


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """A session's records by position, the sha256 of each stored payload (`None`: erased), the
    head its session row names, and the stored projection (both `None` when the session has no
    session row)."""

    records: list[LedgerRecord]
    digests: list[str | None]
    head: ChainHead | None
    stored: StoredProjection | None


def read_snapshot(ledger: AuditLedger, session_id: str) -> LedgerSnapshot:
    with ledger.audit_snapshot() as snapshot:
        stored = next(snapshot.stored([session_id]), None)
        records, digests = snapshot.records(session_id)
    events = [record.position for record in records if record.kind is Kind.EVENT]
    head = None if stored is None else ChainHead(*stored.head)
    return LedgerSnapshot(records, digests, head, stored_projection(stored, events))


def stored_projection(stored: StoredSession | None, events: Iterable[int]) -> StoredProjection | None:
    """What is stored for the session, its window as positions given its event positions."""
    if stored is None:
        return None
    if stored.deleted:
        return StoredProjection(stored.version, None, None, None, None, None)
    _, window = WindowShape(list(stored.prefix), stored.window_base, set(stored.hidden)).split(events)
    return StoredProjection(
        version=stored.version,
        session={
            "user_id": stored.user_id,
            "app_name": stored.app_name,
            "metadata": stored.metadata,
            "created_at": format_timestamp(stored.created_at),
            "expires_at": None if stored.expires_at is None else format_timestamp(stored.expires_at),
        },
        state=stored.state,
        window=tuple(window),
        hidden=stored.hidden,
        stats=stored.stats,
    )
