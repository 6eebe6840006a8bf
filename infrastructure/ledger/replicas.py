"""Streaming replicas of a PostgreSQL ledger: which one may answer a read, and where a read goes
when none can (the primary).

A replica may answer when it is reachable and, for a read that must see this process's own
writes, when it has replayed the WAL up to where the primary stood after them (`WriteFence`).
A replica that cannot be reached (refused, shut down, connection lost) is left out for a while
and the read is made on the next one, or on the primary: reads change nothing, so making one
again elsewhere is safe.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import psycopg
import sqlalchemy as sa
from sessionledger.infrastructure.ledger.sql import SqlLedger
from sessionledger.infrastructure.redaction import hide_passwords

__all__ = ["ReadReplicas", "Replica", "WriteFence", "wal_position"]

T = TypeVar("T")
log = logging.getLogger(__name__)

_POLL_SECONDS = 0.005
_GONE_STATES = ("57P01", "57P02", "57P03")  # admin shutdown, crash shutdown, cannot connect now


def wal_position(text: str) -> int:
    """A WAL position as PostgreSQL prints it (`16/B374D848`) as a number that compares as it does."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def _scalar(engine: sa.Engine, statement: str) -> str | None:
    with engine.connect() as connection:
        value = connection.exec_driver_sql(statement).scalar()
    return None if value is None else str(value)


class WriteFence:
    """Where the primary's WAL stood after this process's latest write: a replica that has replayed
    that far shows the process everything it wrote (read-your-writes across the replication lag).

    A write only marks the fence as moved, once it has returned (no round trip on the append
    path); the primary's WAL position is asked once, by the next read that needs it. Asked after
    the mark, it is at or past the commit record of every write that made it.
    """

    def __init__(self, primary: sa.Engine) -> None:
        self._primary = primary
        self._lock = threading.Lock()
        self._moved = False
        self._always = False
        self._position = 0

    def wrote(self) -> None:
        self._moved = True

    def follow_every_write(self) -> None:
        """Writes this fence is not told of (an append path of its own) may happen at any time:
        ask the primary's position before every read."""
        self._always = True

    def position(self) -> int:
        """The WAL position a replica must have replayed (0: this process wrote nothing)."""
        if not (self._moved or self._always):
            return self._position
        with self._lock:
            self._moved = False  # cleared before asking: a write racing with the question moves it again
            current = _scalar(self._primary, "SELECT pg_current_wal_insert_lsn()")
            self._position = max(self._position, wal_position(current or "0/0"))
            return self._position


@dataclass
class Replica:
    """One replica: its URL (for messages), its ledger, and until when it is left out."""

    url: str
    ledger: SqlLedger
    left_out_until: float = field(default=0.0)

    def replayed(self) -> int | None:
        """How far the replica has replayed the primary's WAL; `None` when it is not replaying
        (not a standby, or promoted): it then has nothing of the primary's after its promotion."""
        replayed = _scalar(self.ledger.engine, "SELECT pg_last_wal_replay_lsn()")
        return None if replayed is None else wal_position(replayed)

    def caught_up(self, fence: int, wait: float) -> bool:
        """Whether the replica has replayed up to `fence`, waiting at most `wait` seconds for it."""
        if fence == 0:
            return True
        deadline = time.monotonic() + wait
        while True:
            replayed = self.replayed()
            if replayed is None:
                return False
            if replayed >= fence:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)


def unreachable(error: BaseException) -> bool:
    """Whether `error` says the server could not be reached or went away (not that the read was
    wrong): connection failures have no SQLSTATE, or one of class 08 or a shutdown's."""
    cause = getattr(error, "orig", error)
    if not isinstance(cause, psycopg.Error):
        return False
    state = cause.sqlstate
    return state is None or state.startswith("08") or state in _GONE_STATES


class ReadReplicas:
    """The replicas, taken in turn, and the primary that answers when none of them can."""

    def __init__(
        self, primary: SqlLedger, replicas: Sequence[Replica], fence: WriteFence, wait: float, retry: float
    ) -> None:
        self.primary = primary
        self.replicas = tuple(replicas)
        self.fence = fence
        self._wait = wait
        self._retry = retry
        self._turn = itertools.count()

    def _candidates(self) -> Iterator[Replica]:
        """The replicas not left out, starting from the next in turn (reads spread over them)."""
        if not self.replicas:
            return
        start = next(self._turn) % len(self.replicas)
        now = time.monotonic()
        for replica in self.replicas[start:] + self.replicas[:start]:
            if replica.left_out_until <= now:
                yield replica

    def _leave_out(self, replica: Replica, error: BaseException) -> None:
        replica.left_out_until = time.monotonic() + self._retry
        log.warning(
            "read replica %s unreachable, reading elsewhere for %.0fs: %s",
            hide_passwords(replica.url),
            self._retry,
            error,
        )

    def read(self, call: Callable[[SqlLedger], T]) -> T:
        """`call` on a replica that has this process's writes, else on the primary."""
        fence = self.fence.position()
        for replica in self._candidates():
            try:
                if replica.caught_up(fence, self._wait):
                    return call(replica.ledger)
            except (sa.exc.DBAPIError, psycopg.Error) as error:
                if not unreachable(error):
                    raise
                self._leave_out(replica, error)
        return call(self.primary)

    @contextmanager
    def entered(self, manager_of: Callable[[SqlLedger], AbstractContextManager[T]]) -> Iterator[T]:
        """`read` for a context manager (an audit snapshot): it is entered on the replica, or on
        the primary when no replica can enter it; what happens inside the block is the caller's."""
        with ExitStack() as stack:
            yield self.read(lambda ledger: stack.enter_context(manager_of(ledger)))

    def after_fork(self) -> None:
        self.primary.after_fork()
        for replica in self.replicas:
            replica.ledger.after_fork()

    def close(self) -> None:
        for replica in self.replicas:
            replica.ledger.close()
