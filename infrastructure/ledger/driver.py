"""Core statements compiled once per dialect and run straight on the driver, for the append path.

SQLAlchemy still writes the SQL (one definition for PostgreSQL and SQLite) and its types still
convert the values; only its per-execution machinery (and its `Connection` wrapper) is skipped,
which on a one-row append costs more than the database does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa


class DriverStatement:
    """One Core statement, compiled for one dialect; `params()` builds the driver's parameters."""

    def __init__(self, statement: sa.Executable, dialect: sa.Dialect, columns: Iterable[str] | None = None):
        compiled = statement.compile(dialect=dialect, column_keys=None if columns is None else list(columns))
        self.sql = compiled.string
        self._order = compiled.positiontup if compiled.positional else None
        self._processors: dict[str, Callable[[Any], Any]] = {}
        for name, bind in compiled.binds.items():
            processor = bind.type._cached_bind_processor(dialect)
            if processor is not None:
                self._processors[name] = processor

    def params(self, values: Mapping[str, Any]) -> Mapping[str, Any] | tuple[Any, ...]:
        processors = self._processors
        bound = {key: processors[key](value) if key in processors else value for key, value in values.items()}
        return bound if self._order is None else tuple(bound[name] for name in self._order)

    def execute(self, cursor: Any, values: Mapping[str, Any]) -> None:
        cursor.execute(self.sql, self.params(values))


@contextmanager
def write_transaction(engine: sa.Engine) -> Iterator[Any]:
    """A write transaction on a pooled DBAPI connection, without a SQLAlchemy `Connection`.

    SQLite connections run with the driver's own transaction handling off (see `engine.py`), so
    the write lock is taken here with BEGIN IMMEDIATE; psycopg begins implicitly.
    """
    pooled = engine.raw_connection()
    driver = pooled.dbapi_connection
    try:
        if engine.dialect.name == "sqlite":
            driver.execute("BEGIN IMMEDIATE")
        yield driver
        driver.commit()
    except BaseException:
        driver.rollback()
        raise
    finally:
        pooled.close()


@contextmanager
def autocommit(engine: sa.Engine) -> Iterator[Any]:
    """A pooled DBAPI connection in autocommit mode: each statement is its own transaction."""
    pooled = engine.raw_connection()
    driver = pooled.dbapi_connection
    driver.autocommit = True
    try:
        yield driver
    finally:
        try:
            driver.autocommit = False
        except Exception:  # a broken connection: never hand it out again
            pooled.invalidate()
        pooled.close()
