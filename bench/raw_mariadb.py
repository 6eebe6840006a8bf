"""The raw baselines on MariaDB/MySQL: plain PyMySQL (the ledger's own driver) on the benchmark's
database, no library in between; the rows are `raw.row_of`'s."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pymysql

_COPY = "CREATE TABLE raw_ledger LIKE ledger"
"""The ledger table's columns, defaults, auto-increment, keys and collation (not its triggers)."""
_INSERT = """INSERT INTO raw_ledger (session_id, position, version, event_id, kind, occurred_at,
    recorded_at, event_type, branch, synthetic, payload, token_count, content_hash, prev_hash, row_hash)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"""
"""Only placeholders in VALUES: PyMySQL's executemany then sends multi-row INSERTs (it sends one
statement per row for any other form)."""
_WINDOW = "SELECT event_id, payload FROM ledger WHERE session_id = %s AND kind = 'event' ORDER BY position"


def connect(url: str, *, autocommit: bool) -> pymysql.Connection:
    """A PyMySQL connection to the database of a `mysql+pymysql://user@host:port/name` URL."""
    address, name = url.split("://", 1)[1].rsplit("/", 1)
    user, hostport = address.rsplit("@", 1)
    host, port = hostport.rsplit(":", 1)
    return pymysql.connect(
        host=host, port=int(port), user=user, database=name, charset="utf8mb4", autocommit=autocommit
    )


def create_table(conn: pymysql.Connection) -> None:
    conn.cursor().execute(_COPY)


def _values(row: tuple[Any, ...], session_id: str | None = None) -> tuple[Any, ...]:
    """`raw.row_of`'s row as this INSERT binds it, times naive UTC (the ledger's DATETIME(6))."""
    sid, position, version, event_id, occurred_at, event_type, text, content, prev, row_hash = row
    now = datetime.now(UTC).replace(tzinfo=None)
    occurred = occurred_at.replace(tzinfo=None)
    return (session_id or sid, position, version, event_id, "event", occurred, now, event_type, None, False,
            text, None, content, prev, row_hash)  # fmt: skip


def insert(conn: pymysql.Connection, row: tuple[Any, ...]) -> None:
    """One event, one autocommitted INSERT (one round trip) on an autocommit connection."""
    conn.cursor().execute(_INSERT, _values(row))


def insert_many(conn: pymysql.Connection, rows: list[tuple[Any, ...]], session_id: str) -> None:
    """`row_of` rows under `session_id` in one transaction: PyMySQL's executemany, which sends
    multi-row INSERTs (as many rows as fit in a statement): the bulk floor without a file."""
    conn.cursor().executemany(_INSERT, [_values(row, session_id) for row in rows])
    conn.commit()


def select_window(conn: pymysql.Connection, session_id: str) -> list[tuple[Any, ...]]:
    """A never-compacted session's window: its event rows by position, each payload decoded (the
    standard library's json, as psycopg decodes the PostgreSQL baseline's)."""
    with conn.cursor() as cursor:
        cursor.execute(_WINDOW, (session_id,))
        return [(event_id, json.loads(payload)) for event_id, payload in cursor.fetchall()]
