"""PostgreSQL's `LoopDriver` (`async_append.py`): the event loop's own connections through
psycopg's async driver, the appends sent by libpq as the synchronous path sends them
(`libpq_statement.py`); imported only when an async service appends to a PostgreSQL ledger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import psycopg
import sqlalchemy as sa
from sessionledger.infrastructure.ledger.appends import OneStatement
from sessionledger.infrastructure.ledger.async_append import APPLICATION_NAME
from sessionledger.infrastructure.ledger.driver import GENERIC_PLANS
from sessionledger.infrastructure.ledger.engine import milliseconds
from sessionledger.infrastructure.ledger.libpq_statement import LibpqStatement


class PostgresLoop:
    """Connections in autocommit, named `APPLICATION_NAME` in `pg_stat_activity` (unless the URL
    names the application), with the ledger's `statement_timeout`, and generic plans for their
    prepared statements (`driver.GENERIC_PLANS`: they run only the append and its token read)."""

    refused: tuple[type[Exception], ...] = (psycopg.IntegrityError,)
    """In autocommit the refused statement was its own transaction: nothing to undo."""

    def __init__(self, url: sa.URL, statement_timeout: float) -> None:
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._timeout_ms = milliseconds(statement_timeout)
        self._statements: dict[str, LibpqStatement] = {}  # by SQL: the appends' few forms

    async def connect(self) -> psycopg.AsyncConnection | None:
        try:
            connection = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, application_name=APPLICATION_NAME
            )
            await connection.execute(f"SET statement_timeout = {self._timeout_ms}; {GENERIC_PLANS}")
        except psycopg.Error:
            return None
        return connection

    async def send(self, connection: psycopg.AsyncConnection, statement: OneStatement) -> list[int]:
        sent = self._statements.get(statement.sql)
        if sent is None:
            sent = self._statements.setdefault(statement.sql, LibpqStatement(statement.sql))
        params = cast(Mapping[str, Any], statement.params)  # by name: psycopg's (`DriverStatement.params`)
        return [await sent.execute_async(connection, params)]

    async def after_refusal(self, connection: psycopg.AsyncConnection) -> None:
        return None

    async def fetch(
        self, connection: psycopg.AsyncConnection, sql: str, params: Mapping[str, Any] | tuple[Any, ...]
    ) -> list[tuple[Any, ...]]:
        cursor = await connection.execute(sql, params)
        return await cursor.fetchall()

    def close(self, connection: psycopg.AsyncConnection) -> None:
        connection.pgconn.finish()  # libpq closes the socket: no loop needed
