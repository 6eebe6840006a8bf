"""Which errors say that the database or the broker failed, and whether for now or for good: the one
classification the workers' retries and the operator's one-line messages (`workers/failures.py`) use."""

from __future__ import annotations

import socket
import sqlite3
import sys
from collections.abc import Iterable
from types import ModuleType
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


def _imported(names: Iterable[str]) -> list[ModuleType]:
    """The modules of `names` imported so far. None of a module's errors can exist before it is
    imported, so a classification counts them only from then on, and imports none itself."""
    return [module for name in names if (module := sys.modules.get(name)) is not None]


def _drivers() -> list[ModuleType]:
    """The network drivers imported so far (PEP 249 modules: each has `OperationalError`,
    `InterfaceError` and `Error`; importing one would cost every command on a SQLite ledger a
    tenth of a second)."""
    return _imported(("psycopg", "pymysql"))


def database_unavailable() -> tuple[type[Exception], ...]:
    """Errors that mean "not now" (connection refused or lost, server restarting or failing over,
    database locked, a deadlock), not "never": raised by SQLAlchemy or, for statements run on the
    driver, by the driver (psycopg's and PyMySQL's, once imported: `_drivers`)."""
    drivers = _drivers()
    return (*_UNAVAILABLE, *(d.OperationalError for d in drivers), *(d.InterfaceError for d in drivers))


def database_errors() -> tuple[type[Exception], ...]:
    """Every error that says the database (or its URL) cannot be used: the unavailable ones, and
    those a retry does not cure (a malformed URL, a refused login, a constraint, no free pooled
    connection); the drivers' once they are imported (`_drivers`)."""
    return (*database_unavailable(), *_UNUSABLE, *(d.Error for d in _drivers()))


_BROKER_ERRORS = {
    "kombu.exceptions": "KombuError",
    "amqp.exceptions": "AMQPError",
    "redis.exceptions": "RedisError",
}
"""The broker clients' error bases, by module."""


def broker_errors() -> tuple[type[BaseException], ...]:
    """What a broker that refuses or does not answer raises: the socket's errors, and the broker
    clients' (kombu's, py-amqp's, redis's) once imported (`_imported`: importing the redis client
    only to classify a failure cost every failing command a fifth of a second)."""
    sockets = (ConnectionRefusedError, ConnectionResetError, socket.gaierror, TimeoutError)
    clients = (getattr(module, _BROKER_ERRORS[module.__name__]) for module in _imported(_BROKER_ERRORS))
    return (*clients, *sockets)


def failed_system(error: BaseException) -> Literal["database", "broker"] | None:
    """Which system `error` says cannot be used, or `None` when it is neither's failure."""
    if isinstance(error, database_errors()):
        return "database"
    if isinstance(error, broker_errors()):
        return "broker"
    return None
