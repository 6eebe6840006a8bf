"""A fresh PostgreSQL (or MariaDB) database per benchmark run, dropped however the run ends (error,
Ctrl-C, SIGTERM)."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import psycopg
import pymysql

ADMIN_URL = os.environ.get("SESSIONLEDGER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
MARIADB = os.environ.get("SESSIONLEDGER_BENCH_MARIADB", "root@127.0.0.1:3306")
"""user@host:port of a MariaDB (or MySQL) account that may create and drop databases."""
PREFIX = os.environ.get("SESSIONLEDGER_BENCH_DB_PREFIX", "sl_bench")
"""The names of the databases a run creates start with it (a test gives its runs their own)."""


@contextmanager
def fresh_postgres(prefix: str = PREFIX) -> Iterator[str]:
    """Yields the new database's libpq URL (`postgresql://...`; `open_service` accepts it as is)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with terminate_as_exit():
        try:
            with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            yield f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
        finally:
            with uninterrupted(), psycopg.connect(ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_mariadb(prefix: str = PREFIX) -> Iterator[str]:
    """Yields the new database's URL (`mysql+pymysql://...`), as `fresh_postgres` does."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with terminate_as_exit():
        try:
            _mariadb_admin(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
            yield f"mysql+pymysql://{MARIADB}/{name}"
        finally:
            with uninterrupted():
                _mariadb_admin(f"DROP DATABASE IF EXISTS `{name}`")


def _mariadb_admin(sql: str) -> None:
    user, address = MARIADB.rsplit("@", 1)
    host, port = address.rsplit(":", 1)
    with pymysql.connect(host=host, port=int(port), user=user, autocommit=True) as conn:
        conn.cursor().execute(sql)


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises `SystemExit` in the main thread, as Ctrl-C raises `KeyboardInterrupt`, so the
    run's `finally` blocks (its database, bench_queue's workers and queues) still run; by default
    SIGTERM ends the process at once and leaves them behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Neither Ctrl-C nor SIGTERM stops a cleanup halfway (a second Ctrl-C is a common reflex)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _exit(number: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + number)
