"""The PostgreSQL side of the ledger's engine (psycopg 3): imported only when a PostgreSQL URL is
opened, so that a command on a SQLite ledger loads neither psycopg nor SQLAlchemy's PostgreSQL dialect."""

from __future__ import annotations

from functools import partial
from typing import Any

import sqlalchemy as sa
from psycopg.adapt import Loader
from psycopg.pq import ConnStatus
from psycopg.types.json import set_json_loads
from psycopg.types.string import ByteaBinaryLoader
from sessionledger.infrastructure.ledger.driver import check_pooled_connections, server_spoke
from sessionledger.infrastructure.ledger.engine import milliseconds
from sessionledger.infrastructure.ledger.schema import loads
from sqlalchemy import event


def postgres_engine(url: sa.URL, pool_size: int, statement_timeout: float, read_only: bool) -> sa.Engine:
    """`create_ledger_engine` for a PostgreSQL URL (`engine.py`)."""
    # no hstore: the ledger has no such column, and SQLAlchemy's lookup of the type, a catalog query
    # on the new server process, was a quarter of opening a ledger (2.5 of 10 ms)
    engine = sa.create_engine(url, pool_size=pool_size, max_overflow=pool_size * 2, use_native_hstore=False)
    check_pooled_connections(engine, _ping, _closed)
    event.listen(engine, "connect", partial(_configure_postgres, statement_timeout, read_only))
    return engine


def binary_cursor(driver: Any) -> Any:
    """A binary cursor on the psycopg connection `driver` that reads `json` as its bytes: in binary
    format that is its stored text, kept as bytes and parsed by nobody here, by psycopg's C loader
    for `bytea` (a Python loader costs a call per row)."""
    cursor = driver.cursor(binary=True)
    cursor.adapters.register_loader("json", ByteaBinaryLoader)
    return cursor


class _JsonText(Loader):
    """`json` values (in text format: every read but the binary cursors') parsed by orjson straight
    from the driver's buffer. psycopg's own JSON loader is a Python method that copies the buffer
    to `bytes` before it calls its `loads`: 0.6-0.7 ms of the 3.2-3.3 ms psycopg took to fetch
    1,000 payloads."""

    load = staticmethod(loads)  # type: ignore[assignment]  # a function, not a method: no Python frame per value


def _configure_postgres(statement_timeout: float, read_only: bool, connection: Any, _record: Any) -> None:
    """orjson for `json` values, UTC as the session time zone (timestamps then arrive in the zone
    the ledger keeps: no per-value conversion from the server's zone on big reads), the statement
    timeout (a session setting: a URL's own `options` stay as they are), and no JIT compilation:
    the ledger's statements are index lookups and plain scans, which JIT does not speed up, while
    a lookup planned over many partitions crosses its cost threshold and is compiled for 250-430 ms
    before it runs for 12 (`verify --since`'s head lookups on a partitioned 1,000,000-event ledger)."""
    set_json_loads(loads, connection)  # jsonb, and the binary formats
    connection.adapters.register_loader("json", _JsonText)
    timeout = milliseconds(statement_timeout)
    settings = f"SET TIME ZONE 'UTC'; SET statement_timeout = {timeout}; SET jit = off"
    if read_only:
        settings += "; SET default_transaction_read_only = on"
    connection.autocommit = True  # one round trip: no transaction to begin and commit around them
    connection.execute(settings)
    connection.autocommit = False


def _ping(dbapi_connection: Any) -> None:
    """One round trip (an empty query, no transaction); `DisconnectionError` when it fails."""
    pgconn = dbapi_connection.pgconn
    try:
        pgconn.exec_(b"")
    except Exception as error:
        raise sa.exc.DisconnectionError(str(error)) from error
    if pgconn.status != ConnStatus.OK:
        raise sa.exc.DisconnectionError("connection lost while idle in the pool")


def _closed(dbapi_connection: Any) -> bool:
    """Whether the server closed the connection: psycopg knows it is broken, or the server's goodbye
    waits on the socket (`driver.server_spoke`)."""
    pgconn = dbapi_connection.pgconn
    return pgconn.status != ConnStatus.OK or server_spoke(pgconn.socket)
