"""Engines for the SQL ledger: PostgreSQL through psycopg 3 (`postgres.py`, imported only when a
PostgreSQL URL is opened), MariaDB and MySQL through PyMySQL (`mysql.py`, likewise), SQLite tuned
for concurrent writers."""

from __future__ import annotations

import importlib
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sessionledger.infrastructure.forks import forget_in_children
from sessionledger.infrastructure.ledger.driver import driver_of
from sessionledger.infrastructure.ledger.sqlite_timeout import TimedConnection
from sessionledger.infrastructure.redaction import hide_passwords
from sqlalchemy import event

WRITE = "ledger_write"
"""Execution option marking a connection that writes: on SQLite its transaction is BEGIN IMMEDIATE."""


def upsert(
    dialect: sa.Dialect,
    table: sa.Table,
    keys: Sequence[str],
    update: Callable[[Any], Mapping[str, Any]] | None = None,
    only_if: Callable[[Any], sa.ColumnElement[bool]] | None = None,
) -> Any:
    """An INSERT into `table` that, where a row with the same `keys` is there already, sets that
    row's columns to `update(new)` (`new`: the columns of the row proposed) when `only_if(new)`
    holds, or leaves it as it is (`update=None`). PostgreSQL and SQLite say so with `ON CONFLICT`,
    MariaDB and MySQL with `ON DUPLICATE KEY UPDATE` (a condition there is a `CASE` per column)."""
    insert = _insert_of(dialect.name)(table)
    if dialect.name != "mysql":
        if update is None:
            return insert.on_conflict_do_nothing(index_elements=list(keys))
        where = None if only_if is None else only_if(insert.excluded)
        return insert.on_conflict_do_update(
            index_elements=list(keys), set_=update(insert.excluded), where=where
        )
    new = insert.inserted
    if update is None:
        return insert.on_duplicate_key_update({keys[0]: table.c[keys[0]]})
    changes = update(new)
    if only_if is not None:
        condition = only_if(new)
        changes = {name: sa.case((condition, value), else_=table.c[name]) for name, value in changes.items()}
    return insert.on_duplicate_key_update(changes)


@cache
def _insert_of(dialect_name: str) -> Callable[[sa.Table], Any]:
    """The dialect's own `insert`, looked up once: its module is the one the engine already loaded
    (importing every dialect's would load PostgreSQL's, asyncpg's module with it, on every SQLite run)."""
    insert: Callable[[sa.Table], Any] = importlib.import_module(f"sqlalchemy.dialects.{dialect_name}").insert
    return insert


_SCHEMES = {
    "postgresql://": "postgresql+psycopg://",
    "postgres://": "postgresql+psycopg://",
    "mysql://": "mysql+pymysql://",
    "mariadb://": "mysql+pymysql://",
    "mariadb+pymysql://": "mysql+pymysql://",
}
"""`postgresql://` and `postgres://` mean psycopg 3, the only PostgreSQL driver installed;
`mysql://`, `mariadb://` and `mariadb+pymysql://` mean PyMySQL under SQLAlchemy's `mysql` dialect,
which serves MariaDB and MySQL alike (its `mariadb` name only refuses to connect to a MySQL), so
the ledger has one name to tell them by."""


def normalize_url(url: str) -> str:
    """The URL with its scheme spelled as `_SCHEMES` says (anything else as it is)."""
    for prefix, scheme in _SCHEMES.items():
        if url.startswith(prefix):
            return scheme + url[len(prefix) :]
    return url


URL_FORMS = (
    "postgresql+psycopg://user@host:port/database, mysql+pymysql://user@host:port/database "
    "(MariaDB or MySQL), sqlite:///relative/path.db, sqlite:////absolute/path.db or memory://"
)
_DRIVERS = {("postgresql", "psycopg"), ("mysql", "pymysql"), ("sqlite", "pysqlite")}


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

        engine = postgres_engine(parsed, pool_size, statement_timeout, read_only)
    elif parsed.get_backend_name() == "mysql":
        from sessionledger.infrastructure.ledger.mysql import mysql_engine

        engine = mysql_engine(parsed, pool_size, statement_timeout, read_only)
    else:
        engine = _sqlite_engine(parsed, busy_timeout_ms, statement_timeout, read_only)
    forget_in_children(engine, _forget_parents_pool)
    return engine


def _forget_parents_pool(engine: sa.Engine) -> None:
    """In a forked child: a new pool, the parent's connections neither used nor closed here, as
    SQLAlchemy advises for forks (psycopg does not close a connection collected after a fork)."""
    engine.dispose(close=False)


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
