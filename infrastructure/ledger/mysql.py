"""The MariaDB and MySQL side of the ledger's engine (PyMySQL): imported only when such a URL is
opened, so that a command on another ledger loads neither PyMySQL nor SQLAlchemy's MySQL dialect.

PyMySQL is pure Python: a fresh machine installs it with no compiler and no libmariadb-dev, which
mysqlclient and the MariaDB connector need (neither ships manylinux wheels)."""

from __future__ import annotations

from functools import partial
from typing import Any

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.engine import milliseconds
from sqlalchemy import event


def mysql_engine(url: sa.URL, pool_size: int, statement_timeout: float, read_only: bool) -> sa.Engine:
    """`create_ledger_engine` for a MariaDB or MySQL URL (`engine.py`): `utf8mb4` on the wire,
    READ COMMITTED as on PostgreSQL (InnoDB's REPEATABLE READ takes gap locks that turn concurrent
    appends into deadlocks), and a dead pooled connection replaced at checkout."""
    engine = sa.create_engine(
        url.update_query_dict({"charset": "utf8mb4"}),
        pool_size=pool_size,
        max_overflow=pool_size * 2,
        pool_pre_ping=True,
        isolation_level="READ COMMITTED",
    )
    event.listen(engine, "connect", partial(_configure, statement_timeout, read_only))
    return engine


def _configure(statement_timeout: float, read_only: bool, connection: Any, _record: Any) -> None:
    """UTC as the session time zone (`NOW()` and the like; the ledger binds UTC itself), strict SQL
    (a value that does not fit is an error, never silently cut), and the statement timeout:
    MariaDB's `max_statement_time` covers every statement, MySQL's `max_execution_time` SELECTs."""
    mariadb = "mariadb" in connection.get_server_info().lower()
    timeout = (
        f"max_statement_time = {statement_timeout:.3f}"
        if mariadb
        else f"max_execution_time = {milliseconds(statement_timeout)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SET time_zone = '+00:00', "
            "sql_mode = CONCAT_WS(',', @@sql_mode, 'STRICT_TRANS_TABLES', 'NO_ENGINE_SUBSTITUTION'), "
            + timeout
        )
        if read_only:
            cursor.execute("SET SESSION TRANSACTION READ ONLY")
    connection.commit()
