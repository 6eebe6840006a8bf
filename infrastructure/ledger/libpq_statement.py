"""A statement run by libpq's own blocking `PQexecPrepared` on a psycopg connection, for the
appends on PostgreSQL (and by libpq's nonblocking `PQsendQueryPrepared` on an asyncio connection,
for the same appends sent from an event loop: `loop_postgres.py`).

psycopg's `cursor.execute` drives the same libpq calls (send, flush, wait, consume, fetch) from a
Python state machine. Its steps run after the socket wakes, with the client's caches cold from the
database's own work between, and on a disk that commits in 0.2 ms they cost about a tenth of an
append (the peers benchmark, alternating: 0.62-0.64 of the floor through `cursor.execute`, 0.68-0.71
through libpq). Here the statement is prepared once per connection (and per set of parameter
types, as psycopg's own cache keys it), its values are dumped by psycopg's `Transformer` (the
adapters the rest of the ledger uses), and libpq sends it, waits and reads the result in C, with the
GIL released. On an asyncio connection libpq sends it and the loop awaits the socket's answer
(`_result`): there psycopg's `cursor.execute` (its query conversion, its prepared statement cache
and cursor, and its wait, which arms a timer at every wait) cost a sequential `LedgerSaver.aput`
20-40 us more of the client's CPU, of about 200 us (alternated blocks of 100 aputs: 223-238 us
through `cursor.execute`, 207-208 through libpq and psycopg's wait, 181-202 as here).
Errors are psycopg's own classes (`psycopg.errors.error_from_result`), so a unique
violation is still an `IntegrityError` and a lost connection an `OperationalError`.

What psycopg's path does and this one does not: cancel the statement on the server when the
caller is interrupted (Ctrl-C waits for the statement, which the connection's `statement_timeout`
bounds), and take the connection's own lock (the caller holds the connection alone: `Autocommit`).
A connection told not to prepare statements (psycopg's `prepare_threshold=None`, as for a pooler
in transaction mode that cannot keep them) runs the statement through psycopg as before.
"""

from __future__ import annotations

import asyncio
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import generators, pq
from psycopg.abc import Buffer
from psycopg.adapt import PyFormat, Transformer
from psycopg.errors import error_from_result

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")
_UNKNOWN_STATEMENT = b"26000"
"""`invalid_sql_statement_name`: the server no longer has the statement (`DEALLOCATE ALL`, a
pooler's reset), which is then prepared again."""


def numbered(sql: str) -> tuple[str, list[str]]:
    """psycopg's `%(name)s` SQL as libpq's `$1, $2, ...`, and the names in number order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PLACEHOLDER.sub(number, sql), names


Connection = psycopg.Connection[Any] | psycopg.AsyncConnection[Any]


class _Prepared:
    """What one connection holds of the statement: its transformer, and the statement's name on
    the server for each set of parameter types."""

    __slots__ = ("made", "names", "transformer")

    def __init__(self, connection: Connection) -> None:
        self.transformer = Transformer(connection)
        self.names: dict[tuple[int, ...], bytes] = {}
        self.made = 0  # names are never reused on a connection: one the server still has cannot clash


class LibpqStatement:
    """A statement's SQL, in psycopg's `%(name)s` form (a `DriverStatement`'s), run by
    `execute(connection, params)` or `await execute_async(connection, params)` with the driver's
    parameters by name (`DriverStatement.params`): the number of rows it changed."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        numbered_sql, self._names = numbered(sql)
        self._sql = numbered_sql.encode()
        self._formats = [PyFormat.AUTO] * len(self._names)
        self._connections: weakref.WeakKeyDictionary[Connection, _Prepared] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # the map is shared; each connection is used by one caller at a time

    def execute(self, connection: psycopg.Connection[Any], params: Mapping[str, Any]) -> int:
        if connection.prepare_threshold is None:  # told not to prepare (a pooler that cannot keep them)
            with connection.cursor() as cursor:
                cursor.execute(self.sql, params)
                return cursor.rowcount
        prepared, dumped, types = self._dumped(connection, params)
        pgconn = connection.pgconn
        for _ in range(2):
            name = prepared.names.get(types) or self._prepare(connection, prepared, types)
            # a NULL is a None value: libpq takes a null pointer, which psycopg's typing does not spell
            result = pgconn.exec_prepared(name, dumped, prepared.transformer.formats)  # type: ignore[arg-type]
            if result.status == pq.ExecStatus.COMMAND_OK:
                return result.command_tuples or 0
            if not _forgotten(prepared, types, result):
                break
        raise _error(connection, result)

    async def execute_async(self, connection: psycopg.AsyncConnection[Any], params: Mapping[str, Any]) -> int:
        """`execute` on an asyncio connection: sent by libpq, its result awaited on the loop."""
        if connection.prepare_threshold is None:
            cursor = await connection.execute(self.sql, params)
            return cursor.rowcount
        prepared, dumped, types = self._dumped(connection, params)
        pgconn = connection.pgconn
        for _ in range(2):
            name = prepared.names.get(types)
            if name is None:
                name = _name(self, prepared)
                pgconn.send_prepare(name, self._sql, types)
                result = await _result(connection)
                if result.status != pq.ExecStatus.COMMAND_OK:
                    raise _error(connection, result)
                prepared.names[types] = name
            pgconn.send_query_prepared(name, dumped, prepared.transformer.formats)
            result = await _result(connection)
            if result.status == pq.ExecStatus.COMMAND_OK:
                return result.command_tuples or 0
            if not _forgotten(prepared, types, result):
                break
        raise _error(connection, result)

    def _dumped(
        self, connection: Connection, params: Mapping[str, Any]
    ) -> tuple[_Prepared, Sequence[Buffer | None], tuple[int, ...]]:
        """The connection's preparations, the parameters dumped in number order, and their types."""
        prepared = self._connections.get(connection)
        if prepared is None:
            prepared = _Prepared(connection)
            with self._lock:
                self._connections[connection] = prepared
        transformer = prepared.transformer
        dumped = transformer.dump_sequence([params[name] for name in self._names], self._formats)
        return prepared, dumped, tuple(transformer.types or ())

    def _prepare(
        self, connection: psycopg.Connection[Any], prepared: _Prepared, types: tuple[int, ...]
    ) -> bytes:
        name = _name(self, prepared)
        result = connection.pgconn.prepare(name, self._sql, types)
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise _error(connection, result)
        prepared.names[types] = name
        return name


async def _result(connection: psycopg.AsyncConnection[Any]) -> pq.abc.PGresult:
    """The result of the one statement sent on the connection, awaited on the running loop: the
    socket watched only while libpq waits for more of the answer (on a small statement, once). A
    statement the socket did not take whole at its send goes through psycopg's own generator,
    which also waits for the socket to take the rest."""
    pgconn = connection.pgconn
    if pgconn.flush():
        sent: list[pq.abc.PGresult] = await connection.wait(generators.execute(pgconn))
        return sent[-1]
    loop = asyncio.get_running_loop()
    results: list[pq.abc.PGresult] = []
    while True:
        while pgconn.is_busy():
            readable = loop.create_future()
            loop.add_reader(pgconn.socket, _wake, readable)
            try:
                await readable
            finally:
                loop.remove_reader(pgconn.socket)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            return results[-1]
        results.append(result)


def _wake(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)


def _name(statement: LibpqStatement, prepared: _Prepared) -> bytes:
    """A new name on the connection for `statement`."""
    prepared.made += 1
    return f"sessionledger_{id(statement):x}_{prepared.made}".encode()


def _forgotten(prepared: _Prepared, types: tuple[int, ...], result: pq.abc.PGresult) -> bool:
    """Whether the statement failed because the server no longer had it: then forgotten here too,
    to be prepared again."""
    if result.error_field(pq.DiagnosticField.SQLSTATE) != _UNKNOWN_STATEMENT:
        return False
    prepared.names.pop(types, None)
    return True


def _error(connection: Connection, result: pq.abc.PGresult) -> psycopg.Error:
    """The error psycopg's own path raises for a failed result: an `OperationalError` when the
    connection is gone (libpq's result then carries no SQLSTATE), else the class of its SQLSTATE."""
    if connection.pgconn.status == pq.ConnStatus.BAD:
        message = result.get_error_message(connection.info.encoding) or "the connection was lost"
        return psycopg.OperationalError(message)
    return error_from_result(result, connection.info.encoding)
