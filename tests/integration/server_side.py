"""The test's own connection to its PostgreSQL or MariaDB database, for what only the server can do
to the ledger's connections: end them, as a restart does."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pymysql
import sqlalchemy as sa

OTHER_MARIADB_CONNECTIONS = (
    "FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()"
)


def on_mariadb(url: str) -> bool:
    return url.startswith("mysql")


def admin_sql(url: str, sql: str) -> list[tuple[Any, ...]]:
    """`sql`'s rows, run on a connection of the test's own to the test's database."""
    if on_mariadb(url):
        address = sa.make_url(url)
        with (
            pymysql.connect(
                host=address.host, port=address.port, user=address.username, database=address.database
            ) as connection,
            connection.cursor() as cursor,
        ):
            cursor.execute(sql)
            return list(cursor.fetchall())
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as connection:
        return connection.execute(sql).fetchall()


def end_connections(url: str, where: str = "") -> None:
    """End every other connection to the test's database (PostgreSQL: those that also match
    `where`, a condition on `pg_stat_activity`), as a restart of the server does, and wait until
    the server has closed them all (their processes list them until then)."""
    if on_mariadb(url):
        listed = f"SELECT id {OTHER_MARIADB_CONNECTIONS}"
        for (id_,) in admin_sql(url, listed):
            admin_sql(url, f"KILL {id_}")
    else:
        listed = (
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            f" AND pid <> pg_backend_pid() {where and f'AND {where}'}"
        )
        admin_sql(url, f"SELECT pg_terminate_backend(pid) FROM ({listed}) AS ended")
    deadline = time.monotonic() + 10
    while admin_sql(url, listed):
        assert time.monotonic() < deadline, "the server did not end the connections within 10 s"
        time.sleep(0.02)
