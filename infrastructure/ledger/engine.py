"""Engines for the SQL ledger: PostgreSQL through psycopg 3, SQLite tuned for concurrent writers."""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

WRITE = "ledger_write"
"""Execution option marking a connection that writes: on SQLite its transaction is BEGIN IMMEDIATE."""


def normalize_url(url: str) -> str:
    """`postgresql://` and `postgres://` mean psycopg 3 (the only PostgreSQL driver installed)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def create_ledger_engine(url: str, *, pool_size: int = 5, busy_timeout_ms: int = 30_000) -> sa.Engine:
    url = normalize_url(url)
    backend = sa.make_url(url).get_backend_name()
    if backend == "postgresql":
        return sa.create_engine(url, pool_pre_ping=False, pool_size=pool_size, max_overflow=pool_size * 2)
    if backend == "sqlite":
        return _sqlite_engine(url, busy_timeout_ms)
    raise ValueError(f"unsupported database URL {url!r}: use postgresql+psycopg://, sqlite:/// or memory://")


def _sqlite_engine(url: str, busy_timeout_ms: int) -> sa.Engine:
    """WAL (readers never block the writer), a busy timeout, and BEGIN IMMEDIATE for writes.

    IMMEDIATE takes the write lock when the transaction starts, so two writers queue on the busy
    timeout instead of both reading and then failing to upgrade ("database is locked").
    """
    engine = sa.create_engine(
        url, connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        dbapi_connection.create_function("lower", 1, _lower, deterministic=True)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        immediate = connection.get_execution_options().get(WRITE, False)
        # straight to the driver: this runs once per transaction, on the append path
        connection.connection.dbapi_connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _lower(text: str | None) -> str | None:
    """Python's `str.lower` (SQLite's own lower() only folds ASCII): search matches every backend."""
    return None if text is None else text.lower()
