"""How often the broker delivered an ingest batch again after losing the worker that had it.

Ingest batches are not retried like other tasks (a retry is a new message at the back of the
queue, which would reorder a partition): a redelivered batch is stored again, in place. A batch
that kills its worker every time (too big for its memory, a crash in a driver) would then hold
its partition forever, so each redelivery is counted here, in the deployment's database, keyed by
the message's task id; past `max_retries` the batch goes to the dead-letter queue. A redelivery
that finds the database down is not counted (the outage is not the batch's fault), and a batch
that is finally stored forgets its count.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.engine import WRITE, upsert_insert
from sessionledger.infrastructure.ledger.schema import redeliveries


class Redeliveries:
    """The `redeliveries` table of one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})

    def count(self, message_id: str) -> int:
        """Count one more redelivery of the message; how many there have been."""
        insert = upsert_insert(self._engine, redeliveries).values(
            message_id=message_id, deliveries=1, first_at=datetime.now(UTC)
        )
        upsert = insert.on_conflict_do_update(
            index_elements=["message_id"], set_={"deliveries": redeliveries.c.deliveries + 1}
        ).returning(redeliveries.c.deliveries)
        with self._writer.begin() as conn:
            return conn.execute(upsert).scalar_one()

    def forget(self, message_id: str) -> None:
        with self._writer.begin() as conn:
            conn.execute(redeliveries.delete().where(redeliveries.c.message_id == message_id))
