"""Engines for the SQL ledger: PostgreSQL through psycopg 3 (`postgres.py`, imported only when a
PostgreSQL URL is opened), SQLite tuned for concurrent writers."""

from __future__ import annotations

import importlib
import sqlite3
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.driver import driver_of
from sessionledger.infrastructure.ledger.sqlite_timeout import TimedConnection
from sessionledger.infrastructure.redaction import hide_passwords
from sqlalchemy import event

WRITE = "ledger_write"
"""Execution option marking a connection that writes: on SQLite its transaction is BEGIN IMMEDIATE."""


def upsert_insert(engine: sa.Engine, table: sa.Table) -> Any:
    """An `INSERT` into `table` that takes `ON CONFLICT` clauses, in the engine's dialect (both
    PostgreSQL and SQLite have them, under the same SQLAlchemy API)."""
    return _insert_of(engine.dialect.name)(table)


@cache
def _insert_of(dialect_name: str) -> Callable[[sa.Table], Any]:
    """The dialect's own `insert`, looked up once: its module is the one the engine already loaded
    (importing both dialects' would load PostgreSQL's, asyncpg's module with it, on every SQLite run)."""
    insert: Callable[[sa.Table], Any] = importlib.import_module(f"sqlalchemy.dialects.{dialect_name}").insert
    return insert


def normalize_url(url: str) -> str:
    """`postgresql://` and `postgres://` mean psycopg 3 (the only PostgreSQL driver installed)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


URL_FORMS = (
    "postgresql+psycopg://user@host:port/database, sqlite:///relative/path.db, "
    "sqlite:////absolute/path.db or memory://"
)
_DRIVERS = {("postgresql", "psycopg"), ("sqlite", "pysqlite")}


def ledger_url(url: str) -> sa.URL:
    """The parsed URL of a SQL ledger; `ValueError` saying what is wrong with it (password masked)."""
    shown = hide_passwords(url)
    try:
        parsed = sa.make_url(normalize_url(url))
    except sa.exc.ArgumentError:
        raise ValueError(f"invalid database URL {shown!r}: use {URL_FORMS}") from None
    except ValueError as error:  # a port that is not a number
        raise ValueError(f"invalid database URL {shown!r} ({error}): use {URL_FORMS}") from None
    if (parsed.get_backend_name(), parsed.get_driver_name()) not in _DRIVERS:
        raise ValueError(f"unsupported database URL {shown!r}: use {URL_FORMS}")
    if parsed.get_backend_name() == "sqlite" and (parsed.host or parsed.username or parsed.port):
        raise ValueError(f"invalid SQLite URL {shown!r}: the path follows three slashes: use {URL_FORMS}")
    return parsed


def create_ledger_engine(
    url: str,
    *,
    pool_size: int = 5,
    busy_timeout_ms: int = 30_000,
    statement_timeout: float = 30.0,
    read_only: bool = False,
) -> sa.Engine:
    """An engine on the ledger's database; `ValueError` naming what is wrong with the URL.

    Every statement is cancelled after `statement_timeout` seconds, so that no single request (a
    search over huge payloads, say) can exhaust the database server or the process. `read_only`:
    every transaction is read-only, so a reader cannot change the database even by mistake (the
    caller checks that there is a database to read: connecting creates a SQLite file).
    """
    parsed = ledger_url(url)
    if parsed.get_backend_name() == "postgresql":
        from sessionledger.infrastructure.ledger.postgres import postgres_engine

        return postgres_engine(parsed, pool_size, statement_timeout, read_only)
    return _sqlite_engine(parsed, busy_timeout_ms, statement_timeout, read_only)


def milliseconds(seconds: float) -> int:
    """PostgreSQL's unit for `statement_timeout`; at least 1 (0 would mean no timeout at all)."""
    return max(1, round(seconds * 1000))


def _sqlite_engine(url: sa.URL, busy_timeout_ms: int, statement_timeout: float, read_only: bool) -> sa.Engine:
    """WAL (readers never block the writer), a busy timeout, BEGIN IMMEDIATE for writes, and a
    statement timeout (`sqlite_timeout.py`).

    IMMEDIATE takes the write lock when the transaction starts, so two writers queue on the busy
    timeout instead of both reading and then failing to upgrade ("database is locked"). A reader
    leaves the journal mode as it finds it (a ledger is WAL since its first writer opened it).
    """
    folder = Path(url.database or ".").parent
    if not read_only and not folder.is_dir():
        raise ValueError(f"cannot create the SQLite ledger {url.database}: no directory {folder}")
    engine = sa.create_engine(
        url,
        connect_args={
            "check_same_thread": False,
            "timeout": busy_timeout_ms / 1000,
            "factory": TimedConnection,
        },
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: TimedConnection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        dbapi_connection.create_function("lower", 1, _lower, deterministic=True)
        dbapi_connection.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if read_only:
            dbapi_connection.execute("PRAGMA query_only = ON")
        else:
            _use_wal(dbapi_connection, busy_timeout_ms)
        dbapi_connection.limit_statements(statement_timeout)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        immediate = connection.get_execution_options().get(WRITE, False)
        # straight to the driver: this runs once per transaction, on the append path
        driver_of(connection.connection).execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _use_wal(connection: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Switch the file to WAL (a property of the file, so once is enough).

    The switch needs a lock that SQLite does not wait for with the busy timeout: when several
    processes open a new file at once, one of them gets "database is locked". Retry until the
    busy timeout instead.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _lower(text: str | None) -> str | None:
    """Python's `str.lower` (SQLite's own lower() only folds ASCII): search matches every backend."""
    return None if text is None else text.lower()
