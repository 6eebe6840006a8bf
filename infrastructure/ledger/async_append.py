"""`AsyncAppend`: the common one-event append, and an adapter's common append (its entries and new
messages), run on the event loop's own connections instead of a thread: one round trip, no thread
hop. PostgreSQL's through psycopg's async driver
(`loop_postgres.py`), MariaDB's and MySQL's through asyncmy (`loop_mysql.py`); this module holds
everything else, once: which loop has the connections, how coroutines wait for one, what a cancel
does, and when the append goes back to the synchronous path.

An append on the async service's threads wakes two threads for each call; around a real append
that hop cost 100-175 us (a quiet machine) to over 500 us (a loaded one), a fifth of an adapter's
append or more. The append here is the very statement the synchronous path runs, made by the same
code (`Appends.one_statement`: the head, the record, the row; `Appends.on_head_statement`: an
adapter's rows planned from the cached head; on MariaDB/MySQL the same procedure call or
packet), only sent from the loop. Whatever is not that common case goes back to the caller
(`None`), who makes the whole append on the synchronous path, with its retries, duplicate check and state
merges: no ledger rule has a second copy here. That is also what happens while another event loop
holds the connections, and after any error, when the connection is dropped (a statement refused by
a constraint only ends its transaction): a head that moved, a duplicate event id and a lost
connection are all answered by the synchronous path, which finds the event stored if this
statement stored it before its answer was lost.

Why several connections, and why a coroutine waits for one rather than taking the thread pool:
with one connection, 100 coroutines appending at once sent 99 of their appends to the pool, whose
threads then passed the GIL among themselves (each releases it on its round trip and another
takes it) while the event loop waited for it: a loop callback of 0.5 ms of CPU took 5-9 ms, and
the loop's largest stall was 8-11 ms against 3-5 ms idle. On `size` loop connections (the pool's
size) with the others waiting, no thread runs Python, and the loop's median stall was that of an
idle loop. A coroutine builds its draft only once it has a connection, so the drafts of many
coroutines are built a few at a time, between round trips, not all in one burst on the loop.

A cancel while a coroutine waits for a connection ends the wait: nothing was sent. Once the
statement is sent, a cancel waits for its answer (`settling.settled`; the statement timeout bounds
it), so the append is stored or not when `CancelledError` is raised, and the connection stays in a
known state. A driver's own answer to a cancel (psycopg asks the server to cancel the statement and
drops the connection at a second cancel) would leave the statement running, and landing, after
the caller had moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.records import Draft
from sessionledger.infrastructure.forks import forget_in_children
from sessionledger.infrastructure.ledger.appends import Appends, OneStatement
from sessionledger.infrastructure.settling import settled

APPLICATION_NAME = "sessionledger async append"
"""The loop connections' name: PostgreSQL's `application_name` (unless the URL names the
application), MySQL's `program_name` connection attribute."""

Made = tuple[Draft, AppendOutcome | None]
"""An append made here: its draft, and `STORED`, or `None` for the synchronous path to append it."""

Connection = Any
"""A loop connection, as its `LoopDriver` opens it (psycopg's, asyncmy's): only the driver uses it."""


class LoopDriver(Protocol):
    """What differs between databases: how a loop connection is opened, sent the append and closed."""

    refused: tuple[type[Exception], ...]
    """The errors of a statement refused by a constraint (a duplicate event id, a position taken),
    after which the connection is fine once `after_refusal` has run."""

    async def connect(self) -> Connection | None:
        """A new connection in autocommit mode with the ledger's statement timeout, on the running
        loop; `None` when none can be opened."""
        ...

    async def send(self, connection: Connection, statement: OneStatement) -> list[int]:
        """Run the statement: the row count of each of its results, in order."""
        ...

    async def after_refusal(self, connection: Connection) -> None:
        """Leave the connection ready for the next append after a `refused` error."""
        ...

    async def fetch(
        self, connection: Connection, sql: str, params: Mapping[str, Any] | tuple[Any, ...]
    ) -> list[tuple[Any, ...]]:
        """Run the read `sql` (a `DriverStatement`'s): its rows."""
        ...

    def close(self, connection: Connection) -> None:
        """Close the connection without a round trip, from any thread, its loop running or closed."""
        ...


def loop_driver(engine: sa.Engine, statement_timeout: float) -> LoopDriver | None:
    """The engine's database's `LoopDriver` (its module imported only now: psycopg's or asyncmy's),
    or `None` where appends are not sent from the loop (SQLite, an uncommon connection setting)."""
    if engine.dialect.name == "postgresql":
        from sessionledger.infrastructure.ledger.loop_postgres import PostgresLoop

        return PostgresLoop(engine.url, statement_timeout)
    if engine.dialect.name == "mysql":
        from sessionledger.infrastructure.ledger.loop_mysql import mysql_loop

        return mysql_loop(engine, statement_timeout)
    return None


class AsyncAppend:
    """Up to `size` asyncio connections to the ledger's database, opened on first use by one event
    loop at a time, for the appends `Appends.one_statement` and `Appends.on_head_statement` can
    make."""

    def __init__(self, appends: Appends, driver: LoopDriver, size: int) -> None:
        self._appends = appends
        self._driver = driver
        self._size = size
        self._closed = False
        self._unbound()
        forget_in_children(self, AsyncAppend._unbound)

    def _unbound(self) -> None:
        """No loop, no connection, no waiter: how it starts, and how a forked child starts again
        (the parent's loop and connections neither used nor closed there: a close ends the
        connection for the parent too)."""
        self._lock = threading.Lock()  # the loop, the connections and the waiters: close() is off the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open: set[Connection] = set()  # the loop's, idle or in use
        self._idle: list[Connection] = []
        self._opening = 0
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()

    async def append(self, draft_of: Callable[[], Draft], live_token: str | None = None) -> Made | None:
        """Wait for a connection of this loop, build the draft (`draft_of()`) and append it (while
        the access token `live_token` is not revoked, if given: `Appends.one_statement`): the
        draft and its outcome; `None` when this loop cannot have a connection (closed, in use by
        another loop, none can be opened): the caller appends on the synchronous path."""
        connection = await self._checkout()
        if connection is None:
            return None
        try:
            draft = draft_of()
            statement = self._appends.one_statement(draft, live_token)
            if statement is None:
                return draft, None
            stored = await settled(self._run(connection, statement))  # sent, it runs to its end
            return draft, AppendOutcome.STORED if stored else None
        finally:
            self._checkin(connection)

    async def append_on_head(self, drafts: Sequence[Draft]) -> list[AppendOutcome] | None:
        """Wait for a connection of this loop and append an adapter's drafts (its entries and new
        messages, one session), planned only then from the session's cached head (the latest this
        process knows: `Appends.on_head_statement`): the drafts' outcomes; `None` when nothing was
        stored here (no connection, an append it cannot plan, a head that moved, a duplicate
        message id, an error): the caller appends them on the synchronous path, as `append`'s."""
        connection = await self._checkout()
        if connection is None:
            return None
        try:
            planned = self._appends.on_head_statement(drafts)
            if planned is None:
                return None
            statement, outcomes = planned
            return outcomes if await settled(self._run(connection, statement)) else None
        finally:
            self._checkin(connection)

    async def read(
        self, sql: str, params: Mapping[str, Any] | tuple[Any, ...]
    ) -> list[tuple[Any, ...]] | None:
        """The rows of one prebuilt read (a `DriverStatement`'s `sql` and `params`) sent on a
        connection of this loop, for a request that reads before it appends (the HTTP session API's
        token check); `None` when this loop cannot have a connection or the read failed (the
        connection is then dropped): the caller reads on the synchronous path."""
        connection = await self._checkout()
        if connection is None:
            return None
        try:
            return await self._driver.fetch(connection, sql, params)
        except BaseException as error:  # lost, timed out, cancelled: what state it is in is unknown
            self._discard(connection)
            if isinstance(error, Exception):
                return None
            raise
        finally:
            self._checkin(connection)

    async def _run(self, connection: Connection, statement: OneStatement) -> bool:
        """Send the statement: whether it moved the head and its rows went in (`False`: the head had
        moved on, an id was taken, or the connection failed, and is then dropped)."""
        try:
            try:
                counts = await self._driver.send(connection, statement)
            except self._driver.refused:  # a duplicate id, or a position taken
                await self._driver.after_refusal(connection)
                counts = []
        except BaseException as error:  # lost, timed out, cancelled: what state it is in is unknown
            self._appends.ran(statement, moved=False)
            self._discard(connection)
            if isinstance(error, Exception):
                return False
            raise
        moved = bool(counts) and counts[statement.counted] == statement.rows
        self._appends.ran(statement, moved)
        return moved

    async def _checkout(self) -> Connection | None:
        """An idle connection of this loop, a new one while there are fewer than `size`, else the
        next one given back; `None` when this loop cannot have one."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._closed or not self._bind(loop):
                    return None
                if self._idle:
                    return self._idle.pop()
                if len(self._open) + self._opening < self._size:
                    self._opening += 1
                    break
                waiter: asyncio.Future[Connection | None] = loop.create_future()
                self._waiters.append(waiter)
            connection = await self._waited(waiter)
            if connection is not None:
                return connection  # else a place came free (one dropped, or not opened): try again
        connection = None
        try:
            connection = await self._connect()
        finally:
            with self._lock:
                self._opening -= 1
                if connection is not None and not self._closed and self._loop is loop:
                    self._open.add(connection)
                else:  # none opened (or no longer wanted): its place is free for a waiter
                    if connection is not None:
                        self._driver.close(connection)
                        connection = None
                    self._hand_over(None)
        return connection

    async def _waited(self, waiter: asyncio.Future[Connection | None]) -> Connection | None:
        try:
            return await waiter
        except asyncio.CancelledError:  # woken just before the cancel: pass on what it was given
            if waiter.done() and not waiter.cancelled():
                given = waiter.result()
                if given is not None:
                    self._checkin(given)
                else:
                    with self._lock:
                        self._hand_over(None)
            raise

    def _bind(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether the connections are (now) this loop's: not while another open loop has them;
        a closed loop's are dropped (under `_lock`)."""
        if self._loop is loop:
            return True
        if self._loop is not None and not self._loop.is_closed():
            return False
        self._forget()
        self._loop = loop
        return True

    async def _connect(self) -> Connection | None:
        return await self._driver.connect()

    def _checkin(self, connection: Connection) -> None:
        """Hand the connection to the first coroutine still waiting, else keep it idle; a dropped
        one (or one of a loop no longer bound) is closed, and a waiter then opens another."""
        with self._lock:
            if connection not in self._open or self._closed:
                self._driver.close(connection)
                self._hand_over(None)  # its place is free: a waiter opens another
                return
            if not self._hand_over(connection):
                self._idle.append(connection)

    def _hand_over(self, connection: Connection | None) -> bool:
        """Give `connection` to the first coroutine still waiting (under `_lock`); `False`: none."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return True
        return False

    def _discard(self, connection: Connection) -> None:
        """A connection in an unknown state: never used again (closed when given back)."""
        with self._lock:
            self._open.discard(connection)

    def _forget(self) -> None:
        """Close the idle connections (no round trip, no need of the loop they were opened on);
        one in use is closed when given back. The waiters look again (and, the connections closed
        or another loop's, append on the synchronous path)."""
        for connection in self._idle:
            self._driver.close(connection)
        self._idle.clear()
        self._open.clear()
        waiters, self._waiters = self._waiters, deque()
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                for waiter in waiters:
                    loop.call_soon_threadsafe(_settle, waiter)

    def close(self) -> None:
        """No append runs here any more; the connections are closed."""
        with self._lock:
            self._closed = True
            self._forget()


def _settle(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_result(None)
