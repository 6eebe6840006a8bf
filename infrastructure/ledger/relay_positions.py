"""Where the relay is in the ledger (`domain.ports.RelayPositions`): table `relay_offsets`, or in memory.

On PostgreSQL, MariaDB and MySQL one relay of a name leads at a time: it holds a lock of the
connection's (an advisory lock; a named lock, `GET_LOCK`) on a connection of its own, and a standby
takes over when the leader's connection goes. SQLite and the in-memory ledger have no way to see
another relay, so every relay leads there.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from threading import Lock

import sqlalchemy as sa
from sessionledger.domain.ports import Ledger
from sessionledger.infrastructure.ledger.engine import WRITE, upsert
from sessionledger.infrastructure.ledger.schema import ledger, relay_offsets


class SqlRelayPositions:
    """Positions in `relay_offsets`, next to the ledger they point into."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})

    def load(self, name: str) -> int:
        with self._engine.connect() as conn:
            return self._stored(conn, name)

    def save(self, name: str, position: int) -> None:
        statement = upsert(
            self._engine.dialect,
            relay_offsets,
            ["name"],
            lambda new: {"global_position": new.global_position},
            only_if=lambda new: relay_offsets.c.global_position < new.global_position,
        ).values(name=name, global_position=position)
        with self._writer.begin() as conn:
            conn.execute(statement)

    def lag(self, name: str) -> int:
        with self._engine.connect() as conn:
            head = conn.execute(sa.select(sa.func.max(ledger.c.global_position))).scalar() or 0
            return max(0, int(head) - self._stored(conn, name))

    @staticmethod
    def _stored(conn: sa.Connection, name: str) -> int:
        stored = conn.execute(
            sa.select(relay_offsets.c.global_position).where(relay_offsets.c.name == name)
        ).scalar()
        return int(stored or 0)

    @contextmanager
    def leadership(
        self, name: str, stop: threading.Event, standing_by: Callable[[], None] | None = None
    ) -> Iterator[bool]:
        dialect = self._engine.dialect.name
        if dialect not in _LEADER_LOCKS:
            yield True
            return
        take, release = _LEADER_LOCKS[dialect]
        key = {"key": f"sessionledger.relay:{name}"}
        with self._engine.connect() as conn:
            waited = False
            while not conn.execute(take, key).scalar():
                conn.rollback()
                if not waited and standing_by is not None:
                    standing_by()
                waited = True
                if stop.wait(1.0):
                    yield False
                    return
            conn.commit()
            try:
                yield True
            finally:
                conn.execute(release)
                conn.commit()


_LEADER_LOCKS = {
    "postgresql": (
        sa.text("SELECT pg_try_advisory_lock(hashtext(:key))"),
        sa.text("SELECT pg_advisory_unlock_all()"),
    ),
    # a digest of the key: MySQL's lock names end at 64 characters
    "mysql": (sa.text("SELECT GET_LOCK(SHA2(:key, 256), 0)"), sa.text("SELECT RELEASE_ALL_LOCKS()")),
}
"""Per dialect, the statements that try to take a relay's lock without waiting, and that release it."""


class MemoryRelayPositions:
    """Positions into one in-memory ledger, kept as long as the object."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._lock = Lock()
        self._positions: dict[str, int] = {}

    def load(self, name: str) -> int:
        with self._lock:
            return self._positions.get(name, 0)

    def save(self, name: str, position: int) -> None:
        with self._lock:
            self._positions[name] = max(position, self._positions.get(name, 0))

    def lag(self, name: str) -> int:
        position = self.load(name)
        rows = self._ledger.tail(position, sys.maxsize)
        return rows[-1].global_position - position if rows else 0

    def leadership(
        self, name: str, stop: threading.Event, standing_by: Callable[[], None] | None = None
    ) -> AbstractContextManager[bool]:
        return nullcontext(True)
