"""MariaDB's and MySQL's `LoopDriver` (`async_append.py`): the event loop's own connections through
asyncmy, PyMySQL's protocol compiled with Cython (its connect arguments, `escape` and results are
PyMySQL's), so the append's text is written as on the synchronous path (`mysql_text.statement_text`,
which tests/adapters/test_mysql_text.py holds to PyMySQL's with either connection); imported only
when an async service appends to such a ledger.

Why not aiomysql, PyMySQL's own Python code under asyncio: reading the packet's four results cost
the loop about 25 us more CPU per append (145-155 us against 120-127 us in the driver, 2 KB
messages on MariaDB 10.11, alternating rounds); an ADK append took 690-740 us against 705-850 us.

The connections take the pool's own connect arguments (SQLAlchemy's, from the engine's URL: the
`utf8mb4` charset, the multi-statement flag, and its FOUND_ROWS flag, which `ROW_COUNT()` in the
packets and procedures depends on) and run the pool's session settings (`mysql.session_settings`).
A URL with an argument asyncmy does not take has no loop connections: its appends stay on the
synchronous path."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncmy
import asyncmy.cursors
import sqlalchemy as sa
from sessionledger.infrastructure.ledger.appends import OneStatement
from sessionledger.infrastructure.ledger.async_append import APPLICATION_NAME
from sessionledger.infrastructure.ledger.driver import head_not_moved
from sessionledger.infrastructure.ledger.mysql import session_settings
from sessionledger.infrastructure.ledger.mysql_text import statement_text

_TAKEN = frozenset(inspect.signature(asyncmy.connect).parameters)
"""The connect arguments asyncmy takes (PyMySQL's names: `database`, `client_flag`, `ssl`...)."""


@dataclass(eq=False)
class LoopConnection:
    """An asyncmy connection, the loop it was opened on (its socket is that loop's) and its cursor."""

    connection: asyncmy.Connection
    loop: asyncio.AbstractEventLoop
    cursor: asyncmy.cursors.Cursor


def mysql_loop(engine: sa.Engine, statement_timeout: float) -> MySQLLoop | None:
    """The engine's loop driver; `None` when its connect arguments are not all asyncmy's."""
    _, arguments = engine.dialect.create_connect_args(engine.url)
    if not _TAKEN.issuperset(arguments):
        return None
    return MySQLLoop(arguments, statement_timeout)


class MySQLLoop:
    """Connections in autocommit, with `APPLICATION_NAME` as their `program_name` attribute."""

    refused: tuple[type[Exception], ...] = (asyncmy.IntegrityError,)

    def __init__(self, arguments: Mapping[str, Any], statement_timeout: float) -> None:
        self._arguments = {**arguments, "autocommit": True, "program_name": APPLICATION_NAME}
        self._statement_timeout = statement_timeout

    async def connect(self) -> LoopConnection | None:
        connection = None
        try:
            connection = await asyncmy.connect(**self._arguments)
            cursor = connection.cursor()
            await cursor.execute(session_settings(connection.get_server_info(), self._statement_timeout))
        except (asyncmy.Error, OSError):
            if connection is not None:
                connection.close()
            return None
        return LoopConnection(connection, asyncio.get_running_loop(), cursor)

    async def send(self, held: LoopConnection, statement: OneStatement) -> list[int]:
        """The statement's text as the synchronous path writes it, and its results (as many as it
        sends) read on the connection itself: a cursor's bookkeeping of each is two more coroutines
        a result. A procedure's call (`driver.Procedure`) counts its rows inserted unless it
        signals that the head did not move."""
        connection = held.connection
        text = statement_text(statement.sql, statement.params, connection)
        if statement.procedure:
            try:
                await connection.query(text)
            except asyncmy.OperationalError as error:
                if not head_not_moved(error):
                    raise
                return [0]
            return [statement.rows]
        counts = [await connection.query(text)]
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
