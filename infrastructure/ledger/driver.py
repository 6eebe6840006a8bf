"""Core statements compiled once per dialect and run straight on the driver, for the append path.

SQLAlchemy still writes the SQL (one definition for PostgreSQL and SQLite) and its types still
convert the values; only its per-execution machinery is skipped, which on a one-row append
costs more than the database does. On PostgreSQL the statements of one append are sent in a
single psycopg pipeline flush (one network round trip instead of one per statement).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
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
def one_flush(connection: sa.Connection) -> Iterator[Any]:
    """The DBAPI connection of an open transaction; on PostgreSQL its statements go in one flush.

    Errors of pipelined statements surface when the block ends (as the driver's exceptions).
    """
    dbapi_connection = connection.connection.dbapi_connection
    pipeline = getattr(dbapi_connection, "pipeline", None)
    with pipeline() if pipeline is not None else nullcontext():
        yield dbapi_connection
