"""What audit and the relay read: a session's every record (`records.py`, on the driver in one
snapshot: sessions of 100,000 records, where per-row cost is the whole cost), every session id,
and the global tail. The last two are one query each on a Core `Connection`."""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from sessionledger.domain.ledger import LedgerRecord
from sessionledger.domain.ports import TailRow
from sessionledger.infrastructure.ledger.records import read_records, snapshot
from sessionledger.infrastructure.ledger.schema import ledger, sessions


class AuditReads:
    """The whole-ledger reads of one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine

    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        with snapshot(self._engine) as conn:
            return iter([record for record, _ in read_records(conn, session_id)])

    def session_ids(self) -> list[str]:
        """Every session row by creation, then any session with ledger records but no session row
        (only a hand-deleted row does that), so a full `verify` still finds those records."""
        orphaned = (
            sa.select(ledger.c.session_id)
            .where(~sa.exists().where(sessions.c.id == ledger.c.session_id))
            .distinct()
            .order_by(ledger.c.session_id)
        )
        with self._engine.connect() as conn:
            known = conn.execute(sa.select(sessions.c.id).order_by(sessions.c.created_at, sessions.c.id))
            return [*known.scalars(), *conn.execute(orphaned).scalars()]

    def tail(self, after: int, limit: int) -> list[TailRow]:
        query = (
            sa.select(ledger.c.global_position, ledger.c.session_id, sessions.c.app_name, ledger.c.kind)
            .join(sessions, sessions.c.id == ledger.c.session_id)
            .where(ledger.c.global_position > after)
            .order_by(ledger.c.global_position)
            .limit(limit)
        )
        with self._engine.connect() as conn:
            return [
                TailRow(row.global_position, row.session_id, row.app_name, row.kind)
                for row in conn.execute(query)
            ]
