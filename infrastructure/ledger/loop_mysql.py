"""MariaDB's and MySQL's `LoopDriver` (`async_append.py`): the event loop's own connections through
aiomysql, which is PyMySQL's protocol code under asyncio, so the packet's text is written
(`mysql_text.statement_text`) and its results read by the same protocol code as on the
synchronous path; imported only when an async service appends to such a ledger.

The connections take the pool's own connect arguments (SQLAlchemy's, from the engine's URL: the
`utf8mb4` charset, the multi-statement flag, and its FOUND_ROWS flag, which `ROW_COUNT()` in the
packet depends on) and run the pool's session settings (`mysql.session_settings`). A URL with an
argument aiomysql does not take has no loop connections: its appends stay on the synchronous path."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiomysql
import sqlalchemy as sa
from sessionledger.infrastructure.ledger.appends import OneStatement
from sessionledger.infrastructure.ledger.async_append import APPLICATION_NAME
from sessionledger.infrastructure.ledger.mysql import session_settings
from sessionledger.infrastructure.ledger.mysql_text import statement_text

_TAKEN = frozenset(inspect.signature(aiomysql.connect).parameters)
"""The connect arguments aiomysql takes."""


@dataclass(eq=False)
class LoopConnection:
    """An aiomysql connection, the loop it was opened on (its socket is that loop's) and its cursor."""

    connection: aiomysql.Connection
    loop: asyncio.AbstractEventLoop
    cursor: aiomysql.Cursor


def mysql_loop(engine: sa.Engine, statement_timeout: float) -> MySQLLoop | None:
    """The engine's loop driver; `None` when its connect arguments are not all aiomysql's."""
    _, arguments = engine.dialect.create_connect_args(engine.url)
    if "database" in arguments:
        arguments["db"] = arguments.pop("database")  # PyMySQL's name for it, and aiomysql's
    if not _TAKEN.issuperset(arguments):
        return None
    return MySQLLoop(arguments, statement_timeout)


class MySQLLoop:
    """Connections in autocommit, with `APPLICATION_NAME` as their `program_name` attribute."""

    refused: tuple[type[Exception], ...] = (aiomysql.IntegrityError,)

    def __init__(self, arguments: Mapping[str, Any], statement_timeout: float) -> None:
        self._arguments = {**arguments, "autocommit": True, "program_name": APPLICATION_NAME}
        self._statement_timeout = statement_timeout

    async def connect(self) -> LoopConnection | None:
        connection = None
        try:
            connection = await aiomysql.connect(**self._arguments)
            cursor = await connection.cursor()
            await cursor.execute(session_settings(connection.get_server_info(), self._statement_timeout))
        except (aiomysql.Error, OSError):
            if connection is not None:
                connection.close()
            return None
        return LoopConnection(connection, asyncio.get_running_loop(), cursor)

    async def send(self, held: LoopConnection, statement: OneStatement) -> list[int]:
        """The packet's text as `driver.Packet` writes it, its results (as many as it sends) read
        on the connection itself: a cursor's bookkeeping of each is two more coroutines a result."""
        connection = held.connection
        counts = [await connection.query(statement_text(statement.sql, statement.params, connection))]
        for _ in range(statement.results - 1):
            counts.append(await connection.next_result())
        return counts

    async def fetch(
        self, held: LoopConnection, sql: str, params: Mapping[str, Any] | tuple[Any, ...]
    ) -> list[tuple[Any, ...]]:
        await held.cursor.execute(sql, params)
        return list(await held.cursor.fetchall())

    async def after_refusal(self, held: LoopConnection) -> None:
        """A packet stops at its failing statement with its transaction open: roll it back."""
        await held.connection.rollback()

    def close(self, held: LoopConnection) -> None:
        """On the connection's loop: now on its thread, else at its next turn. A closed loop can no
        longer close the socket (its transport, marked closed here, fails to schedule the close):
        the garbage collector closes it with the transport."""
        with contextlib.suppress(RuntimeError):  # the loop is closed
            if held.loop.is_closed() or _running_loop() is held.loop:
                held.connection.close()
            else:
                held.loop.call_soon_threadsafe(held.connection.close)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
