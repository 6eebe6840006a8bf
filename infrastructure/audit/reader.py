"""Reading a session's ledger for audit: every record, the digest of each payload as stored, and
the session head, in one consistent snapshot.

On the SQL ledger the payload's stored text is hashed as it is: it is the canonical text the
ledger hashed when it wrote the row (PostgreSQL `json` and SQLite text keep it byte for byte), so
a match proves the content and costs no re-serialization. The in-memory ledger keeps no text: its
payloads are hashed through `domain.ledger.canonical`, the rule itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa

from domain.ledger import Kind, LedgerRecord, canonical, sha256_hex
from domain.ports import Ledger
from infrastructure.audit.chain import ChainHead
from infrastructure.ledger.schema import ledger as ledger_table
from infrastructure.ledger.schema import sessions
from infrastructure.ledger.sql import SqlLedger


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """A session's records by position, the sha256 of each stored payload (`None`: erased), and
    the head its session row names (`None` when the backend keeps no head apart from the records)."""

    records: list[LedgerRecord]
    digests: list[str | None]
    head: ChainHead | None


def read_snapshot(ledger: Ledger, session_id: str) -> LedgerSnapshot:
    if isinstance(ledger, SqlLedger):
        return _read_sql(ledger.engine, session_id)
    records = list(ledger.records(session_id))
    digests = [None if r.payload is None else sha256_hex(canonical(r.payload)) for r in records]
    return LedgerSnapshot(records, digests, None)


_BATCH = 5_000
"""Rows fetched per round trip (a server-side cursor on PostgreSQL: memory stays bounded there)."""
_RECORD_COLUMNS = (
    ledger_table.c.position,
    ledger_table.c.version,
    ledger_table.c.kind,
    ledger_table.c.event_id,
    ledger_table.c.occurred_at,
    ledger_table.c.recorded_at,
    ledger_table.c.event_type,
    ledger_table.c.branch,
    ledger_table.c.synthetic,
    sa.cast(ledger_table.c.payload, sa.Text),
    ledger_table.c.token_count,
    ledger_table.c.content_hash,
    ledger_table.c.prev_hash,
    ledger_table.c.row_hash,
    ledger_table.c.global_position,
)


def _read_sql(engine: sa.Engine, session_id: str) -> LedgerSnapshot:
    """The session row's head and every record in one transaction (one snapshot on both databases)."""
    options = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
    records: list[LedgerRecord] = []
    digests: list[str | None] = []
    with engine.connect().execution_options(**options) as conn, conn.begin():
        head_row = conn.execute(
            sa.select(sessions.c.head_position, sessions.c.head_hash).where(sessions.c.id == session_id)
        ).first()
        result = conn.execution_options(yield_per=_BATCH).execute(
            sa.select(*_RECORD_COLUMNS)
            .where(ledger_table.c.session_id == session_id)
            .order_by(ledger_table.c.position)
        )
        rows = (row for batch in result.partitions() for row in batch)
        loads, digest, kinds = json.loads, sha256_hex, {kind.value: kind for kind in Kind}
        for (position, version, kind, event_id, occurred_at, recorded_at, event_type, branch, synthetic,
             text, token_count, content_hash, prev_hash, row_hash, global_position) in rows:  # fmt: skip
            records.append(
                LedgerRecord(
                    session_id,
                    position,
                    version,
                    kinds.get(kind, kind),  # an unknown kind (tampering) fails the row hash
                    event_id,
                    occurred_at,
                    None if text is None else loads(text),
                    content_hash,
                    prev_hash,
                    row_hash,
                    event_type,
                    branch,
                    synthetic,
                    recorded_at,
                    token_count,
                    global_position,
                )
            )
            digests.append(None if text is None else digest(text))
    head = None if head_row is None else ChainHead(head_row.head_position, head_row.head_hash)
    return LedgerSnapshot(records, digests, head)
