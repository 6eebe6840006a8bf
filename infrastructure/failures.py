"""Which errors say that the database or the broker failed, and whether for now or for good: the one
classification the workers' retries and the operator's one-line messages (`workers/failures.py`) use."""

from __future__ import annotations

import socket
import sqlite3
import sys
from typing import Literal

import sqlalchemy as sa

_UNAVAILABLE: tuple[type[Exception], ...] = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    sqlite3.OperationalError,
)
_UNUSABLE: tuple[type[Exception], ...] = (
    sa.exc.DBAPIError,
    sa.exc.ArgumentError,
    sa.exc.TimeoutError,
    sqlite3.Error,
)


def database_unavailable() -> tuple[type[Exception], ...]:
    """Errors that mean "not now" (connection refused or lost, server restarting or failing over,
    database locked), not "never": raised by SQLAlchemy or, for statements run on the driver, by the
    driver. psycopg's are among them once psycopg is imported: none of its errors can exist before,
    and importing it would cost every command on a SQLite ledger a tenth of a second."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return _UNAVAILABLE
    return (*_UNAVAILABLE, psycopg.OperationalError, psycopg.InterfaceError)


def database_errors() -> tuple[type[Exception], ...]:
    """Every error that says the database (or its URL) cannot be used: the unavailable ones, and
    those a retry does not cure (a malformed URL, a refused login, a constraint, no free pooled
    connection); psycopg's once it is imported (`database_unavailable`)."""
    psycopg = sys.modules.get("psycopg")
    unusable = _UNUSABLE if psycopg is None else (*_UNUSABLE, psycopg.Error)
    return (*database_unavailable(), *unusable)


def broker_errors() -> tuple[type[BaseException], ...]:
    """What a broker that refuses or does not answer raises; imported only once something failed
    (the redis client alone costs every command a quarter of a second at start)."""
    from amqp.exceptions import AMQPError
    from kombu.exceptions import KombuError
    from redis.exceptions import RedisError

    sockets = (ConnectionRefusedError, ConnectionResetError, socket.gaierror, TimeoutError)
    return (KombuError, AMQPError, RedisError, *sockets)


def failed_system(error: BaseException) -> Literal["database", "broker"] | None:
    """Which system `error` says cannot be used, or `None` when it is neither's failure."""
    if isinstance(error, database_errors()):
        return "database"
    if isinstance(error, broker_errors()):
        return "broker"
    return None
