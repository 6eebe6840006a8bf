"""Each session's chain head, cached per ledger so a one-event append needs no read before its
write (read by the append itself when the cache has none: `Appends._read_head`), and read on a
Core `Connection` when a write must lock it.

A cached head can be stale (another process wrote): an append checks it in its own statement
(`statements.MOVE_HEAD`), and the ledger forgets it and reads it again when it was. A head that
is not cached is read by the append that needs it, so the cache is bounded (`KEPT_HEADS`).
"""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock

import sqlalchemy as sa
from sessionledger.domain.write_plans import LedgerHead
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.rows import head_of

KEPT_HEADS = 100_000
"""How many sessions' heads a ledger remembers (about 320 bytes each): past it, the head kept least
recently is forgotten. Unbounded, a long-lived worker held the head of every session it ever
wrote to: 3.2 GB after ten million. A forgotten session's next append reads its head again (one
round trip)."""


class HeadCache:
    """The last head this process saw per session, for the `KEPT_HEADS` sessions whose heads it
    kept most recently (every append keeps the head it leaves); safe to share between threads."""

    def __init__(self) -> None:
        self._heads: OrderedDict[str, LedgerHead] = OrderedDict()  # kept least recently first
        self._lock = Lock()

    def get(self, session_id: str) -> LedgerHead | None:
        return self._heads.get(session_id)

    def keep(self, session_id: str, head: LedgerHead) -> None:
        """Remember `head`, unless a later one is already known (writers finish out of order)."""
        with self._lock:
            cached = self._heads.get(session_id)
            if cached is None or cached.position < head.position:
                self._heads[session_id] = head
                self._heads.move_to_end(session_id)
                if len(self._heads) > KEPT_HEADS:
                    self._heads.popitem(last=False)

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._heads.pop(session_id, None)


def locked_head(conn: sa.Connection, session_id: str) -> LedgerHead | None:
    """A live session's head, its row locked until `conn`'s transaction ends; `None` when it is
    unknown or deleted."""
    row = conn.execute(statements.LOCK_HEAD, {"sid": session_id}).first()
    return None if row is None else head_of(row)
