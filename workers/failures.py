"""Why a command or a worker process cannot run, as the one line its operator reads (exit status 2).

Settings that do not validate, no ledger to read, a database or a broker that refuses or does not
answer, and the library's `ValueError` for a bad argument are the operator's to fix, and a traceback
would bury the reason; anything else is a bug and keeps its traceback. Every line has its URLs'
passwords masked.
"""

from __future__ import annotations

import socket
import sqlite3
from typing import Any

import psycopg
import sqlalchemy as sa
from pydantic import ValidationError
from sessionledger.infrastructure.bootstrap import NoLedger
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.settings import Settings

DATABASE_ERRORS = (sa.exc.DBAPIError, sa.exc.ArgumentError, sa.exc.TimeoutError, psycopg.Error, sqlite3.Error)


def _broker_errors() -> tuple[type[BaseException], ...]:
    """What a broker that refuses or does not answer raises; imported only once something failed
    (the redis client alone costs every command a quarter of a second at start)."""
    from amqp.exceptions import AMQPError
    from kombu.exceptions import KombuError
    from redis.exceptions import RedisError

    sockets = (ConnectionRefusedError, ConnectionResetError, socket.gaierror, TimeoutError)
    return (KombuError, AMQPError, RedisError, *sockets)


def operator_message(error: BaseException, settings: Settings | None) -> str | None:
    """The one line saying what is wrong, or None when `error` is not an operator's to fix."""
    if isinstance(error, ValidationError):
        message = "invalid settings: " + "; ".join(_problem(detail) for detail in error.errors())
    elif isinstance(error, DATABASE_ERRORS):
        where = f" at {settings.database_url}" if settings else ""
        message = f"cannot use the database{where}: {_reason(error)}"
    elif isinstance(error, _broker_errors()):
        where = f" at {settings.broker_url}" if settings and settings.broker_url else ""
        message = f"cannot use the broker{where}: {_reason(error)}"
    elif isinstance(error, (ValueError, NoLedger)):
        message = str(error)
    else:
        return None
    return hide_passwords(" ".join(message.split()))


def _problem(detail: Any) -> str:
    where = ".".join(map(str, detail["loc"]))
    return f"{where}: {detail['msg']}" if where else str(detail["msg"])


def _reason(error: BaseException) -> str:
    """The driver's own words (SQLAlchemy's wrapper adds the statement and a link to its docs)."""
    cause = getattr(error, "orig", None) or error
    return str(cause) or type(cause).__name__
