"""SQLite has no statement timeout: this connection class gives it one, like PostgreSQL's.

Each statement starts a clock when it is executed; a progress handler, called every thousand
virtual-machine steps, interrupts the statement once its clock passes the timeout (SQLite then
rolls the statement back). SQLite runs a statement as its rows are read, so the clock runs until
the last one is. The interruption is an `sqlite3.OperationalError`, as a cancelled PostgreSQL
statement is a psycopg `OperationalError`, with a message that names the timeout.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

PROGRESS_STEPS = 1000
"""Virtual-machine steps between two looks at the clock (some microseconds of work)."""

_Method = TypeVar("_Method", bound=Callable[..., Any])


def _explained(method: _Method) -> _Method:
    """`method`, its interruption by the timeout raised as an error that says so."""

    @wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as error:
            connection = self if isinstance(self, TimedConnection) else self.connection
            if str(error) != "interrupted" or not connection.overdue():
                raise
            raise sqlite3.OperationalError(
                f"statement timeout: the statement ran longer than {connection.timeout:g} s and was "
                "cancelled (SESSIONLEDGER_STATEMENT_TIMEOUT)"
            ) from error

    return run  # type: ignore[return-value]  # same signature as `method`


class TimedCursor(sqlite3.Cursor):
    """A cursor whose statements run under their connection's timeout."""

    @_explained
    def execute(self, sql: str, parameters: Any = (), /) -> TimedCursor:
        self.connection.start_clock()  # type: ignore[attr-defined]  # always a TimedConnection's
        return super().execute(sql, parameters)

    @_explained
    def executemany(self, sql: str, parameters: Any, /) -> TimedCursor:
        self.connection.start_clock()  # type: ignore[attr-defined]  # always a TimedConnection's
        return super().executemany(sql, parameters)

    # reading rows runs the statement further, so it can be interrupted too
    fetchone = _explained(sqlite3.Cursor.fetchone)
    fetchmany = _explained(sqlite3.Cursor.fetchmany)
    fetchall = _explained(sqlite3.Cursor.fetchall)
    __next__ = _explained(sqlite3.Cursor.__next__)


class TimedConnection(sqlite3.Connection):
    """`sqlite3.connect(..., factory=TimedConnection)`, then `limit_statements(seconds)`."""

    timeout = math.inf
    _deadline = math.inf

    def limit_statements(self, seconds: float) -> None:
        self.timeout = seconds
        self.set_progress_handler(self.overdue, PROGRESS_STEPS)

    def start_clock(self) -> None:
        self._deadline = time.monotonic() + self.timeout

    def overdue(self) -> bool:
        return time.monotonic() > self._deadline

    def cursor(self, factory: Any = TimedCursor) -> Any:
        return super().cursor(factory)

    @_explained
    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.start_clock()
        return super().execute(sql, parameters)

    @_explained
    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        self.start_clock()
        return super().executemany(sql, parameters)
