"""`LibpqStatement`: a statement run by libpq's own `PQexecPrepared` (or, on an asyncio connection,
`PQsendQueryPrepared`) stores what psycopg's `cursor.execute` would, prepares again when the
parameters' types change or the server forgot the statement, raises psycopg's own errors, and
leaves the connection usable (`test_autocommit.py`: the append after the server ended its
connection)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest
import sqlalchemy as sa
from sessionledger.infrastructure.ledger.driver import DriverStatement
from sessionledger.infrastructure.ledger.libpq_statement import LibpqStatement, numbered
from sqlalchemy.dialects import postgresql

_TABLE = sa.Table(
    "libpq_rows",
    sa.MetaData(),
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("label", sa.Text),
    sa.Column("at", sa.DateTime(timezone=True)),
    sa.Column("flag", sa.Boolean),
)


@pytest.fixture
def connection(pg_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE libpq_rows (id bigint PRIMARY KEY, label text, at timestamptz, flag boolean)"
        )
        yield conn


@pytest.fixture
def insert() -> LibpqStatement:
    return LibpqStatement(DriverStatement(_TABLE.insert(), postgresql.psycopg.dialect()).sql)


def _rows(connection: psycopg.Connection) -> list[tuple[object, ...]]:
    return connection.execute("SELECT id, label, at, flag FROM libpq_rows ORDER BY id").fetchall()


def test_placeholders_are_numbered_once_per_name_and_percent_signs_unescaped():
    assert numbered("SELECT %(a)s, %(b)s, %(a)s, '100%%'") == ("SELECT $1, $2, $1, '100%'", ["a", "b"])


def test_values_of_every_size_and_kind_are_stored_as_given(connection, insert):
    elsewhere = datetime(2025, 1, 1, 9, 30, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    given = [
        (5, "short", datetime(2025, 1, 1, tzinfo=UTC), True),  # a small integer: int2 on the wire
        (70_000, 'tab\t newline\n quote" backslash\\ é 漢字 🙂', elsewhere, False),  # int4
        (2**40, None, None, None),  # int8, and NULLs where the first rows had values
        (2**63 - 1, "", datetime(1970, 1, 1, tzinfo=UTC), True),
    ]
    for id_, label, at, flag in given:
        assert insert.execute(connection, {"id": id_, "label": label, "at": at, "flag": flag}) == 1
    assert _rows(connection) == given
    assert connection.info.transaction_status is psycopg.pq.TransactionStatus.IDLE


def test_a_statement_the_server_forgot_is_prepared_again(connection, insert):
    insert.execute(connection, {"id": 1, "label": "a", "at": None, "flag": None})
    connection.execute("DEALLOCATE ALL")  # what a pooler's reset does
    assert insert.execute(connection, {"id": 2, "label": "b", "at": None, "flag": None}) == 1
    assert [row[0] for row in _rows(connection)] == [1, 2]


def test_errors_are_psycopgs_own_and_the_connection_stays_usable(connection, insert):
    insert.execute(connection, {"id": 1, "label": "a", "at": None, "flag": None})
    with pytest.raises(psycopg.errors.UniqueViolation, match="libpq_rows_pkey"):
        insert.execute(connection, {"id": 1, "label": "again", "at": None, "flag": None})
    assert insert.execute(connection, {"id": 3, "label": "c", "at": None, "flag": None}) == 1
    assert _rows(connection) == [(1, "a", None, None), (3, "c", None, None)]


def test_a_killed_connection_is_an_operational_error(connection, insert, pg_url):
    insert.execute(connection, {"id": 1, "label": "a", "at": None, "flag": None})
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError):
        insert.execute(connection, {"id": 2, "label": "b", "at": None, "flag": None})


def test_a_connection_told_not_to_prepare_runs_the_statement_unprepared(connection, insert):
    connection.prepare_threshold = None  # as for a pooler in transaction mode
    assert insert.execute(connection, {"id": 1, "label": "a", "at": None, "flag": True}) == 1
    assert _rows(connection) == [(1, "a", None, True)]
    assert connection.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)


def test_on_an_asyncio_connection_it_stores_the_same_prepares_again_and_raises_psycopgs_errors(
    connection, insert, pg_url
):
    rows = [
        {"id": 1, "label": "a", "at": datetime(2025, 1, 1, tzinfo=UTC), "flag": True},
        {"id": 2**40, "label": None, "at": None, "flag": None},
        {"id": 7, "label": "after DEALLOCATE ALL", "at": None, "flag": False},
    ]

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(
            pg_url.replace("+psycopg", ""), autocommit=True
        ) as aio:
            assert await insert.execute_async(aio, rows[0]) == 1
            assert await insert.execute_async(aio, rows[1]) == 1  # other types: prepared again
            with pytest.raises(psycopg.errors.UniqueViolation, match="libpq_rows_pkey"):
                await insert.execute_async(aio, rows[0])
            await aio.execute("DEALLOCATE ALL")
            assert await insert.execute_async(aio, rows[2]) == 1
            assert aio.info.transaction_status is psycopg.pq.TransactionStatus.IDLE

    asyncio.run(run())
    assert _rows(connection) == [tuple(rows[n].values()) for n in (0, 2, 1)]  # by id
