"""Compaction leases (`domain.ports.LeaseStore`): on the `sessions` row, or in a map beside `MemoryLedger`.

A claim is one short `UPDATE` on the session row (`lease_owner`, `lease_until`); the summarizer
then runs with no transaction open, and the write-back is version-checked by the ledger anyway.
Deleting a session clears its lease (`SqlLedger.delete_session`), so a deleted session has no holder.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from threading import Lock

import sqlalchemy as sa
from sessionledger.domain.ports import Ledger
from sessionledger.infrastructure.ledger.engine import WRITE
from sessionledger.infrastructure.ledger.schema import sessions


class SqlLeaseStore:
    """Claims and releases the lease columns of `sessions`."""

    def __init__(self, engine: sa.Engine) -> None:
        self._writer = engine.execution_options(**{WRITE: True})
        self._engine = engine

    def claim(self, session_id: str, owner: str, seconds: float, now: datetime | None = None) -> bool:
        now = now or datetime.now(UTC)
        with self._writer.begin() as conn:
            claimed = conn.execute(
                sessions.update()
                .where(
                    sessions.c.id == session_id,
                    sessions.c.deleted_at.is_(None),
                    sa.or_(
                        sessions.c.lease_owner.is_(None),
                        sessions.c.lease_until < now,
                        sessions.c.lease_owner == owner,
                    ),
                )
                .values(lease_owner=owner, lease_until=now + timedelta(seconds=seconds))
            ).rowcount
        return claimed == 1

    def release(self, session_id: str, owner: str) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id, sessions.c.lease_owner == owner)
                .values(lease_owner=None, lease_until=None)
            )

    def holder(self, session_id: str, now: datetime | None = None) -> str | None:
        now = now or datetime.now(UTC)
        with self._engine.connect() as conn:
            return conn.execute(
                sa.select(sessions.c.lease_owner).where(
                    sessions.c.id == session_id, sessions.c.lease_until >= now
                )
            ).scalar()


class MemoryLeaseStore:
    """Leases on the live sessions of one in-memory ledger, under the SQL store's rules."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._lock = Lock()
        self._leases: dict[str, tuple[str, datetime]] = {}  # session id -> (owner, until)

    def claim(self, session_id: str, owner: str, seconds: float, now: datetime | None = None) -> bool:
        now = now or datetime.now(UTC)
        with self._lock:
            if self._ledger.get_session(session_id) is None:
                return False
            held = self._leases.get(session_id)
            if held is not None and held[0] != owner and held[1] >= now:
                return False
            self._leases[session_id] = (owner, now + timedelta(seconds=seconds))
            return True

    def release(self, session_id: str, owner: str) -> None:
        with self._lock:
            held = self._leases.get(session_id)
            if held is not None and held[0] == owner:
                del self._leases[session_id]

    def holder(self, session_id: str, now: datetime | None = None) -> str | None:
        now = now or datetime.now(UTC)
        with self._lock:
            held = self._leases.get(session_id)
            if held is None or held[1] < now or self._ledger.get_session(session_id) is None:
                return None
            return held[0]
