"""Why a command or a worker process cannot run, as the one line its operator reads (exit status 2).

Settings that do not validate, no ledger to read, a database or a broker that refuses or does not
answer, and the library's `ValueError` for a bad argument are the operator's to fix, and a traceback
would bury the reason; anything else is a bug and keeps its traceback. Every line has its URLs'
passwords masked.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError
from sessionledger.infrastructure.bootstrap import NoLedger
from sessionledger.infrastructure.failures import failed_system
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.settings import Settings

T = TypeVar("T")


def operator_message(error: BaseException, settings: Settings | None) -> str | None:
    """The one line saying what is wrong, or None when `error` is not an operator's to fix
    (which database and broker errors are is `infrastructure/failures.py`'s to say)."""
    if isinstance(error, ValidationError):
        message = "invalid settings: " + "; ".join(_problem(detail) for detail in error.errors())
    elif (failed := failed_system(error)) == "database":
        where = f" at {settings.database_url}" if settings else ""
        message = f"cannot use the database{where}: {_reason(error)}"
    elif failed == "broker":
        where = f" at {settings.broker_url}" if settings and settings.broker_url else ""
        message = f"cannot use the broker{where}: {_reason(error)}"
    elif isinstance(error, (ValueError, NoLedger)):
        message = str(error)
    else:
        return None
    return hide_passwords(" ".join(message.split()))


def run_or_explain(run: Callable[[], T]) -> T:
    """`run()`; when it fails for a reason its operator can fix (`operator_message`: a database it
    cannot use, a bad argument), that reason on one line of stderr and exit status 2, as the
    command line says it. For scripts: the examples run under it."""
    try:
        return run()
    except Exception as error:
        message = operator_message(error, None)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2) from None


def _problem(detail: Any) -> str:
    where = ".".join(map(str, detail["loc"]))
    return f"{where}: {detail['msg']}" if where else str(detail["msg"])


def _reason(error: BaseException) -> str:
    """The driver's own words (SQLAlchemy's wrapper adds the statement and a link to its docs)."""
    cause = getattr(error, "orig", None) or error
    return str(cause) or type(cause).__name__
