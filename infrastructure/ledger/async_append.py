"""`AsyncAppend`: the common one-event append on PostgreSQL, run on the event loop's own connections
(psycopg's async driver) instead of a thread: one round trip, no thread hop.

An append on the async service's threads wakes two threads for each call; around a real append
that hop cost 100-175 us (a quiet machine) to over 500 us (a loaded one), a fifth of an adapter's
append or more. The append here is the very statement the synchronous path runs, made by the same
code (`Appends.one_statement`: the head, the record, the row), only sent from the loop. Whatever
is not that common case goes back to the caller (`None`), who makes the whole append on the
synchronous path, with its retries, duplicate check and state merges: no ledger rule has a second
copy here. That is also what happens while another event loop holds the connections, and after
any error, when the connection is dropped: a head that moved, a duplicate event id and a lost
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
known state. psycopg's own answer to a cancel, asking the server to cancel the statement and
dropping the connection at a second cancel, would leave the statement running, and landing, after
the caller had moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable

import psycopg
import sqlalchemy as sa
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.records import Draft
from sessionledger.infrastructure.ledger.appends import Appends
from sessionledger.infrastructure.ledger.engine import milliseconds
from sessionledger.infrastructure.settling import settled

APPLICATION_NAME = "sessionledger async append"
"""The loop connections' name in `pg_stat_activity` (unless the URL names the application)."""

Made = tuple[Draft, AppendOutcome | None]
"""An append made here: its draft, and `STORED`, or `None` for the synchronous path to append it."""


class AsyncAppend:
    """Up to `size` asyncio connections to the ledger's PostgreSQL, opened on first use by one event
    loop at a time, for the appends `Appends.one_statement` can make."""

    def __init__(self, appends: Appends, engine: sa.Engine, statement_timeout: float, size: int) -> None:
        self._appends = appends
        self._conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._timeout_ms = milliseconds(statement_timeout)
        self._size = size
        self._lock = threading.Lock()  # the loop, the connections and the waiters: close() is off the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open: set[psycopg.AsyncConnection] = set()  # the loop's, idle or in use
        self._idle: list[psycopg.AsyncConnection] = []
        self._opening = 0
        self._waiters: deque[asyncio.Future[psycopg.AsyncConnection | None]] = deque()
        self._closed = False

    async def append(self, draft_of: Callable[[], Draft]) -> Made | None:
        """Wait for a connection of this loop, build the draft (`draft_of()`) and append it: the
        draft and its outcome; `None` when this loop cannot have a connection (closed, in use by
        another loop, none can be opened): the caller appends on the synchronous path."""
        connection = await self._checkout()
        if connection is None:
            return None
        try:
            draft = draft_of()
            return draft, await settled(self._run(connection, draft))  # sent, it runs to its end
        finally:
            self._checkin(connection)

    async def _run(self, connection: psycopg.AsyncConnection, draft: Draft) -> AppendOutcome | None:
        statement = self._appends.one_statement(draft)
        if statement is None:
            return None
        try:
            cursor = await connection.execute(statement.sql, statement.params)
        except psycopg.IntegrityError:  # a duplicate id, or a position taken: the connection is fine
            self._appends.ran(statement, moved=False)
            return None
        except BaseException as error:  # lost, timed out, cancelled: what state it is in is unknown
            self._appends.ran(statement, moved=False)
            self._discard(connection)
            if isinstance(error, Exception):
                return None
            raise
        moved = cursor.rowcount == 1
        self._appends.ran(statement, moved)
        return AppendOutcome.STORED if moved else None

    async def _checkout(self) -> psycopg.AsyncConnection | None:
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
                waiter: asyncio.Future[psycopg.AsyncConnection | None] = loop.create_future()
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
                        connection.pgconn.finish()
                        connection = None
                    self._hand_over(None)
        return connection

    async def _waited(
        self, waiter: asyncio.Future[psycopg.AsyncConnection | None]
    ) -> psycopg.AsyncConnection | None:
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

    async def _connect(self) -> psycopg.AsyncConnection | None:
        try:
            connection = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, application_name=APPLICATION_NAME
            )
            await connection.execute(f"SET statement_timeout = {self._timeout_ms}")
        except psycopg.Error:
            return None
        return connection

    def _checkin(self, connection: psycopg.AsyncConnection) -> None:
        """Hand the connection to the first coroutine still waiting, else keep it idle; a dropped
        one (or one of a loop no longer bound) is closed, and a waiter then opens another."""
        with self._lock:
            if connection not in self._open or self._closed:
                connection.pgconn.finish()
                self._hand_over(None)  # its place is free: a waiter opens another
                return
            if not self._hand_over(connection):
                self._idle.append(connection)

    def _hand_over(self, connection: psycopg.AsyncConnection | None) -> bool:
        """Give `connection` to the first coroutine still waiting (under `_lock`); `False`: none."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return True
        return False

    def _discard(self, connection: psycopg.AsyncConnection) -> None:
        """A connection in an unknown state: never used again (closed when given back)."""
        with self._lock:
            self._open.discard(connection)

    def _forget(self) -> None:
        """Close the sockets of the idle connections (no round trip, no need of the loop they were
        opened on); one in use is closed when given back. The waiters look again (and, the
        connections closed or another loop's, append on the synchronous path)."""
        for connection in self._idle:
            connection.pgconn.finish()
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


def _settle(waiter: asyncio.Future[psycopg.AsyncConnection | None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
