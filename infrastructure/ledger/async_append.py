"""`AsyncAppend`: the common one-event append on PostgreSQL, run on the event loop's own connection
(psycopg's async driver) instead of a thread: one round trip, no thread hop.

An append on the async service's threads wakes two threads for each call; around a real append
that hop cost 100-175 us (a quiet machine) to over 500 us (a loaded one), a fifth of an adapter's
append or more. The append here is the very statement the synchronous path runs, made by the same
code (`Appends.one_statement`: the head, the record, the row), only sent from the loop. Whatever
is not that common case goes back to the caller (`None`), who makes the whole append on the
synchronous path, with its retries, duplicate check and state merges: no ledger rule has a second
copy here. That is also what happens when the connection is in use (by another coroutine or
another loop), and after any error, when the connection is dropped: a head that moved, a
duplicate event id and a lost connection are all answered by the synchronous path, which finds
the event stored if this statement stored it before its answer was lost.
"""

from __future__ import annotations

import asyncio
import threading

import psycopg
import sqlalchemy as sa
from sessionledger.domain.ledger import Draft
from sessionledger.domain.ports import AppendOutcome
from sessionledger.infrastructure.ledger.appends import Appends
from sessionledger.infrastructure.ledger.engine import milliseconds

APPLICATION_NAME = "sessionledger async append"
"""The loop connection's name in `pg_stat_activity` (unless the URL names the application)."""


class AsyncAppend:
    """One asyncio connection to the ledger's PostgreSQL, opened on first use, for the appends
    `Appends.one_statement` can make."""

    def __init__(self, appends: Appends, engine: sa.Engine, statement_timeout: float) -> None:
        self._appends = appends
        self._conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._timeout_ms = milliseconds(statement_timeout)
        self._in_use = threading.Lock()
        self._connection: psycopg.AsyncConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @property
    def free(self) -> bool:
        """Whether an append now would be made here (open, not in use by another append)."""
        return not self._closed and not self._in_use.locked()

    async def append(self, draft: Draft) -> AppendOutcome | None:
        """`STORED`, or `None`: not appended here, for the synchronous path to append."""
        if self._closed or not self._in_use.acquire(blocking=False):
            return None
        try:
            statement = self._appends.one_statement(draft)
            if statement is None:
                return None
            connection = await self._connected()
            if connection is None:
                return None
            try:
                cursor = await connection.execute(statement.sql, statement.params)
            except psycopg.IntegrityError:  # a duplicate id, or a position taken: the connection is fine
                self._appends.ran(statement, moved=False)
                return None
            except BaseException as error:  # lost, timed out, cancelled: what state it is in is unknown
                self._appends.ran(statement, moved=False)
                self._forget()
                if isinstance(error, Exception):
                    return None
                raise
            moved = cursor.rowcount == 1
            self._appends.ran(statement, moved)
            return AppendOutcome.STORED if moved else None
        finally:
            self._in_use.release()

    async def _connected(self) -> psycopg.AsyncConnection | None:
        """This loop's connection; `None` while another loop's is open, or when none can be opened."""
        loop = asyncio.get_running_loop()
        if self._connection is not None and self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                return None
            self._forget()
        if self._connection is None:
            try:
                connection = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, application_name=APPLICATION_NAME
                )
                await connection.execute(f"SET statement_timeout = {self._timeout_ms}")
            except psycopg.Error:
                return None
            self._connection, self._loop = connection, loop
        return self._connection

    def _forget(self) -> None:
        """Close the connection's socket: no round trip, and no need of the loop it was opened on."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.pgconn.finish()

    def close(self) -> None:
        """No append runs here any more; the connection is closed."""
        self._closed = True
        self._forget()
