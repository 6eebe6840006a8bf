"""Compaction leases: one compaction per session at a time, without holding a lock across an LLM call.

A claim is one short `UPDATE` on the session row (`lease_owner`, `lease_until`); the summarizer
then runs with no transaction open, and the write-back is version-checked by the ledger anyway.
A worker that dies leaves a lease that expires; the same task delivered again (same task id)
takes its own lease back at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.engine import WRITE
from sessionledger.infrastructure.ledger.schema import sessions


class SessionLeases:
    """Claims and releases the lease columns of `sessions`."""

    def __init__(self, engine: sa.Engine) -> None:
        self._writer = engine.execution_options(**{WRITE: True})
        self._engine = engine

    def claim(self, session_id: str, owner: str, seconds: float, now: datetime | None = None) -> bool:
        """True when `owner` now holds the session's lease (free, expired, or already its own)."""
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
        """Give the lease back, if `owner` still holds it."""
        with self._writer.begin() as conn:
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id, sessions.c.lease_owner == owner)
                .values(lease_owner=None, lease_until=None)
            )

    def holder(self, session_id: str, now: datetime | None = None) -> str | None:
        """Who holds an unexpired lease on the session, if anyone."""
        now = now or datetime.now(UTC)
        with self._engine.connect() as conn:
            return conn.execute(
                sa.select(sessions.c.lease_owner).where(
                    sessions.c.id == session_id, sessions.c.lease_until >= now
                )
            ).scalar()
