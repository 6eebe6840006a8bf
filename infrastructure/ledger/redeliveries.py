"""Redelivery counts of broker messages (`domain.ports.RedeliveryCounts`): table `redeliveries`, or a map."""

from __future__ import annotations

from datetime import UTC, datetime
from threading import Lock

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.engine import WRITE, upsert
from sessionledger.infrastructure.ledger.schema import redeliveries


class SqlRedeliveryCounts:
    """Counts in `redeliveries`, one row per message id, counted up by an upsert."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})

    def count(self, message_id: str) -> int:
        """The upsert, then the count read back in its transaction (whose row lock it holds): MySQL
        has no RETURNING, and this runs once per redelivered batch only."""
        count_up = upsert(
            self._engine.dialect,
            redeliveries,
            ["message_id"],
            lambda _new: {"deliveries": redeliveries.c.deliveries + 1},
        ).values(message_id=message_id, deliveries=1, first_at=datetime.now(UTC))
        read = sa.select(redeliveries.c.deliveries).where(redeliveries.c.message_id == message_id)
        with self._writer.begin() as conn:
            conn.execute(count_up)
            return int(conn.execute(read).scalar_one())

    def forget(self, message_id: str) -> None:
        with self._writer.begin() as conn:
            conn.execute(redeliveries.delete().where(redeliveries.c.message_id == message_id))


class MemoryRedeliveryCounts:
    """Counts for the workers of one process (a lost in-memory worker takes its messages along)."""

    def __init__(self) -> None:
        self._lock = Lock()
        self._counts: dict[str, int] = {}

    def count(self, message_id: str) -> int:
        with self._lock:
            self._counts[message_id] = self._counts.get(message_id, 0) + 1
            return self._counts[message_id]

    def forget(self, message_id: str) -> None:
        with self._lock:
            self._counts.pop(message_id, None)
