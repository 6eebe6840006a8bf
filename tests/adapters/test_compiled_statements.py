"""`driver.compiled`: a statement is compiled once in the process for each kind of dialect, and a
dialect of another kind (driver, server version, the quote names are written in) gets its own."""

from __future__ import annotations

import sqlalchemy as sa
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.driver import compiled
from sqlalchemy.dialects import mysql, postgresql, sqlite


def test_one_kind_of_dialect_shares_one_compiled_statement() -> None:
    first, second = postgresql.psycopg.dialect(), postgresql.psycopg.dialect()
    assert compiled(statements.HEAD, first) is compiled(statements.HEAD, second)
    assert compiled(statements.INSERT_ROW, first, statements.ROW_COLUMNS) is compiled(
        statements.INSERT_ROW, second, statements.ROW_COLUMNS
    )


def test_another_driver_or_column_set_gets_its_own() -> None:
    on_postgres = compiled(statements.HEAD, postgresql.psycopg.dialect())
    on_sqlite = compiled(statements.HEAD, sqlite.pysqlite.dialect())
    assert on_postgres is not on_sqlite
    assert "%(sid)s" in on_postgres.sql and "?" in on_sqlite.sql
    some = compiled(statements.INSERT_ROW, sqlite.pysqlite.dialect(), ["session_id", "position"])
    every = compiled(statements.INSERT_ROW, sqlite.pysqlite.dialect(), statements.ROW_COLUMNS)
    assert some.sql != every.sql


def test_a_server_of_another_version_or_quote_gets_its_own() -> None:
    """The dialect learns both on its first connection: MySQL's `ANSI_QUOTES` mode quotes names
    with double quotes, which a statement compiled for backticks would break."""
    plain, newer, ansi = mysql.pymysql.dialect(), mysql.pymysql.dialect(), mysql.pymysql.dialect()
    plain.server_version_info = ansi.server_version_info = (10, 11, 6)
    newer.server_version_info = (11, 4, 2)
    ansi.identifier_preparer = ansi.preparer(ansi, server_ansiquotes=True)
    quoted = sa.select(sa.table("order", sa.column("key")).c.key)  # reserved words: always quoted
    assert compiled(quoted, plain) is not compiled(quoted, newer)
    assert "`order`" in compiled(quoted, plain).sql
    assert '"order"' in compiled(quoted, ansi).sql
