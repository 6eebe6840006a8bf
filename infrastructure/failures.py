"""Which errors say that the database or the broker failed, and whether for now or for good: the one
classification the workers' retries and the operator's one-line messages (`workers/failures.py`) use."""

from __future__ import annotations

import socket
import sqlite3
from typing import Literal

import psycopg
import sqlalchemy as sa

DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    sqlite3.OperationalError,
)
"""Errors that mean "not now" (connection refused or lost, server restarting or failing over,
database locked), not "never": raised by SQLAlchemy or, for statements run on the driver, by the driver."""

DATABASE_ERRORS: tuple[type[Exception], ...] = (
    *DATABASE_UNAVAILABLE,
    sa.exc.DBAPIError,
    sa.exc.ArgumentError,
    sa.exc.TimeoutError,
    psycopg.Error,
    sqlite3.Error,
)
"""Every error that says the database (or its URL) cannot be used: the unavailable ones above, and
those a retry does not cure (a malformed URL, a refused login, a constraint, no free pooled connection)."""


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
    if isinstance(error, DATABASE_ERRORS):
        return "database"
    if isinstance(error, broker_errors()):
        return "broker"
    return None
