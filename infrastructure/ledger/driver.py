"""Core statements compiled once per dialect and run straight on the driver, for the hot paths
(the append, a compaction's window read and write, the whole-session record read), the bulk
insert of a batch's ledger rows (`BulkInsert`: COPY on PostgreSQL), and MariaDB's and MySQL's
ways to run several statements in one round trip (`Packet`, `Procedure`).

SQLAlchemy still writes the SQL (one definition for PostgreSQL and SQLite) and its types still
convert the values, both ways; only its per-execution machinery (and its `Connection` wrapper) is
skipped, which on a one-row append costs more than the database does, and on a 1,000-row read
about as much as the database. Rows come back as named tuples of the statement's columns, as
SQLAlchemy's own rows would (`row.position`), built once per row.
"""

from __future__ import annotations

import functools
import hashlib
import re
import select
import threading
import time
import weakref
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, cast

import sqlalchemy as sa
from sessionledger.infrastructure.forks import forget_in_children
from sessionledger.infrastructure.ledger.mysql_text import statement_text
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.compiler import SQLCompiler

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")
"""A parameter of SQL in the `pyformat` or `format` paramstyle (by name, in order), or its escaped
percent sign."""

PING_AFTER_IDLE_SECONDS = 1.0
"""A pooled connection unused for longer is pinged before it is used again (`check_pooled_connections`)."""

ServerClosed = Callable[[Any], bool]
"""Whether the server closed a driver connection while it sat idle, told without a round trip
(`server_spoke` on its socket, `postgres.py`, `mysql.py`)."""

_server_closed: weakref.WeakKeyDictionary[sa.Engine, ServerClosed] = weakref.WeakKeyDictionary()
"""Each engine's `ServerClosed`, for the connection `Autocommit` keeps out of the pool."""


def check_pooled_connections(engine: sa.Engine, ping: Callable[[Any], None], closed: ServerClosed) -> None:
    """`pool_pre_ping` without its round trip on a connection in steady use.

    A connection the server closed (a restart, `pg_terminate_backend`, `KILL`, an idle timeout)
    is found by `closed` at every checkout, with no round trip, and replaced: the server says
    goodbye on the socket before it closes it. One idle for more than `PING_AFTER_IDLE_SECONDS`
    is also pinged, which finds what no goodbye announced (a failover that moved the server's
    address: the first packet sent is refused). `ping(dbapi_connection)` is the driver's cheapest
    round trip, raising `sa.exc.DisconnectionError` when the connection is gone; the pool then
    replaces it in place. `Autocommit` checks its kept connection with `closed` too.
    """
    _server_closed[engine] = closed

    @sa.event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @sa.event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if closed(dbapi_connection):
            raise sa.exc.DisconnectionError("the server closed the connection while it was in the pool")
        idle_since = record.info.get("idle_since")
        if idle_since is not None and time.monotonic() - idle_since >= PING_AFTER_IDLE_SECONDS:
            ping(dbapi_connection)


def server_spoke(socket: int) -> bool:
    """Whether anything waits to be read on the socket of a connection between statements, which
    is owed nothing: the server's goodbye (its notice that it ends the connection, or the end of
    the stream), or, rarely, a notice of its own, which then costs a reconnect and never an
    answer read as another statement's. One `poll` with no wait (`select` fails on a descriptor
    past 1,023, which a busy process has)."""
    poller = select.poll()
    poller.register(socket, select.POLLIN)
    return bool(poller.poll(0))


def integrity_errors(dialect: sa.Dialect) -> tuple[type[Exception], ...]:
    """A constraint violation, raised by SQLAlchemy or, for statements run on the driver, by the driver."""
    return (sa.exc.IntegrityError, dialect.loaded_dbapi.IntegrityError)


class DriverStatement:
    """One Core statement, compiled for one dialect; `params()` builds the driver's parameters,
    `rows()` runs a SELECT and converts each column as SQLAlchemy's type for it would, into a
    named tuple (`row_type`: one field per result column, named as SQLAlchemy names it)."""

    def __init__(
        self, statement: sa.ClauseElement, dialect: sa.Dialect, columns: Iterable[str] | None = None
    ):
        keys = None if columns is None else list(columns)
        # a SELECT, INSERT, UPDATE or DELETE compiles to SQL's compiler, whose tables are read below
        compiled = cast(SQLCompiler, statement.compile(dialect=dialect, column_keys=keys))
        result_columns = compiled._result_columns or []
        self.sql = compiled.string
        self._order = compiled.positiontup if compiled.positional else None
        every = compiled.construct_params(_check=False)
        self.names = tuple(every)
        """The statement's parameter names, as its SQL spells them."""
        self.types = {name: bind.type for name, bind in compiled.binds.items()}
        """Each parameter's SQLAlchemy type."""
        # the statement's own values (`column == "literal"`), bound like the caller's
        self._literals = {name: value for name, value in every.items() if not compiled.binds[name].required}
        self._processors: dict[str, Callable[[Any], Any]] = {}
        for name, bind in compiled.binds.items():
            processor = bind.type._cached_bind_processor(dialect)
            if processor is not None:
                self._processors[name] = processor
        # a type made at run time, one per statement, which mypy cannot follow
        self.row_type = namedtuple("Row", [column.keyname for column in result_columns])  # type: ignore[misc]  # see above
        self._converters = [
            (index, processor)
            for index, column in enumerate(result_columns)
            if (processor := column.type._cached_result_processor(dialect, None)) is not None
        ]

    def params(self, values: Mapping[str, Any]) -> Mapping[str, Any] | tuple[Any, ...]:
        bound = self.bound(values)
        return bound if self._order is None else tuple(bound[name] for name in self._order)

    def spelled(self, spell: Callable[[str], str]) -> str:
        """The SQL with each parameter written as `spell(its name)`."""
        order = iter(self._order or ())

        def write(found: re.Match[str]) -> str:
            return "%" if found[0] == "%%" else spell(found[1] or next(order))

        return _PLACEHOLDER.sub(write, self.sql)

    def converted(self, names: Sequence[str]) -> list[tuple[str, Callable[[Any], Any] | None]]:
        """Each parameter name with its type's bind processor (`None`: the value is bound as it is)."""
        return [(name, self._processors.get(name)) for name in names]

    def bound(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The values of the statement's parameters by name, each converted by its type's bind
        processor: only the names it binds (a caller's other values are not sent, nor escaped into
        a MariaDB packet's text)."""
        given = {**self._literals, **values} if self._literals else values
        bound = {name: given[name] for name in self.names}
        for key, processor in self._processors.items():  # a few columns' types convert (times, flags)
            if key in bound:
                bound[key] = processor(bound[key])
        return bound

    def execute(self, cursor: Any, values: Mapping[str, Any]) -> None:
        cursor.execute(self.sql, self.params(values))

    def rows(self, cursor: Any, values: Mapping[str, Any]) -> list[Any]:
        """Every row of the statement, its values converted by their columns' types."""
        self.execute(cursor, values)
        return list(self.named(cursor.fetchall()))

    def stream(self, cursor: Any, values: Mapping[str, Any], chunk: int) -> Iterator[Any]:
        """The rows as they arrive, converted as by `rows()`: on PostgreSQL `chunk` rows at a time
        (psycopg's chunked mode), so the caller works through the first rows while the server
        still reads and sends the rest; a sqlite3 cursor steps through its result as it is read."""
        if hasattr(cursor, "stream"):
            rows = cursor.stream(self.sql, self.params(values), size=chunk)
        else:
            self.execute(cursor, values)
            rows = cursor
        return self.named(rows)

    def named(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
        """Rows as the driver returned them, converted as by `rows()` (for a caller that ran `sql` itself)."""
        new, row_type, converters = tuple.__new__, self.row_type, self._converters
        if not converters:
            for row in rows:
                yield new(row_type, row)
            return
        for row in rows:
            converted = list(row)
            for index, convert in converters:
                converted[index] = convert(converted[index])
            yield new(row_type, converted)


_COMPILED: dict[tuple[object, ...], DriverStatement] = {}
"""`compiled`'s statements, by statement, dialect kind and columns; each statement a module's
constant or a cached builder's, so the map stays as small as the ledger's set of statements."""


def compiled(
    statement: sa.ClauseElement, dialect: sa.Dialect, columns: Sequence[str] | None = None
) -> DriverStatement:
    """`DriverStatement(statement, dialect, columns)`, compiled once in the process for each kind
    of dialect (`_dialect_kind`) rather than once per opened ledger: LangGraph's documentation
    opens its checkpointer in a `with` block per request, and a ledger opened so compiled its
    statements every time, 24 ms of the 70 ms such a request took. `statement` lives as long as
    the process (a module's constant, or what a cached builder made): it is the key as itself."""
    key = (statement, _dialect_kind(dialect), None if columns is None else tuple(columns))
    found = _COMPILED.get(key)
    if found is None:  # two threads may both compile it: the first one stored is kept
        found = _COMPILED.setdefault(key, DriverStatement(statement, dialect, columns))
    return found


def _dialect_kind(dialect: sa.Dialect) -> tuple[object, ...]:
    """What a statement's compiled form depends on besides the statement: the dialect and its
    driver, the server's kind and version (learnt on the first connection), and the quote names
    are written in (MySQL's under `ANSI_QUOTES`). The ledger binds every value, so no other server
    setting reaches the SQL, and its types convert values by the dialect's name alone."""
    return (
        type(dialect),
        dialect.server_version_info,
        getattr(dialect, "is_mariadb", False),
        dialect.identifier_preparer.initial_quote,
    )


class Packet:
    """Statements sent as one multi-statement packet in one transaction of their own (one round
    trip, on a connection in autocommit mode): MariaDB's and MySQL's way to do what PostgreSQL does
    in one statement with DML in a CTE. Their parameters share one namespace, so the statements
    must not bind one name to two meanings. On an error the server stops at the failing statement
    with the transaction open: the caller hands the connection back (`Autocommit` does), and the
    pool's reset rolls it back."""

    def __init__(self, statements: Sequence[sa.ClauseElement], dialect: sa.Dialect) -> None:
        self._statements = [compiled(statement, dialect) for statement in statements]
        self.sql = "; ".join(["START TRANSACTION", *(s.sql for s in self._statements), "COMMIT"])
        self.last_result = len(self._statements)
        """The index of the last statement's result among the packet's (START TRANSACTION's first)."""
        self.results = self.last_result + 2
        """How many results the packet sends: one per statement, START TRANSACTION's and COMMIT's too."""

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return _merged(self._statements, values)

    def execute(self, driver: Any, values: Mapping[str, Any]) -> list[int]:
        """Each statement's row count, in order. The values are written into the text by
        `mysql_text.statement_text` (PyMySQL's own text, made in a fraction of its time)."""
        with driver.cursor() as cursor:
            cursor.execute(statement_text(self.sql, self.params(values), driver))
            counts = []  # the first result is START TRANSACTION's, the last COMMIT's
            while cursor.nextset():
                counts.append(cursor.rowcount)
        return counts[: self.last_result]


def _merged(statements: Iterable[DriverStatement], values: Mapping[str, Any]) -> dict[str, Any]:
    """The driver's parameters of every statement, by name: each name once, however many
    statements bind it (its text is written with every value escaped once)."""
    params: dict[str, Any] = {}
    for statement in statements:
        params.update(statement.bound(values))
    return params


HEAD_NOT_MOVED = "sessionledger: the head was not moved"
"""The message of the error a `Procedure` signals when its first statement changed no row."""
_SIGNALED = 1644
"""The error number of a `SIGNAL SQLSTATE '45000'` (MariaDB's and MySQL's `ER_SIGNAL_EXCEPTION`)."""
_ALREADY_EXISTS = 1304
"""`ER_SP_ALREADY_EXISTS`: a procedure of that name exists."""
_ACCESS_DENIED = frozenset({1044, 1142, 1227, 1370})
"""The errors of an account refused a privilege: on the database, a table, a global privilege, a
routine (MariaDB's and MySQL's `ER_DBACCESS_DENIED_ERROR` and its kin)."""


class Procedure:
    """Statements run in one transaction by a stored procedure of their own (MariaDB and MySQL),
    called by one statement that answers with one result. A `Packet` of the same statements
    answers with one result a statement and two for its transaction, and the server sends the
    first ones before the commit's wait for the disk: one more wake-up of the client, and more of
    its driver's work, per append. On a quiet machine the one-event append's call, against its
    packet: the client's CPU 93 against 147 us, the server's 200 against 230, and 0.71 of a raw
    INSERT's rate against 0.63 (docs/benchmarks.md, bench_mariadb).

    The first statement is the head move from the cached head: when it changes no row (the head
    moved, the session was deleted, a token was revoked) the procedure rolls back and signals
    `HEAD_NOT_MOVED`, which `execute` answers with `False`, so the others run only after a head
    that moved. The procedure is named after a hash of its definition, made from its statements:
    created once per database when a ledger is opened to write (`appends.create_procedures`), and
    a release that changes the statements calls one of another name. It runs with its caller's
    privileges (`SQL SECURITY INVOKER`), and its string parameters are in the ledger's character
    set and `collation`, so they compare with its columns as bound values do."""

    def __init__(self, name: str, statements: Sequence[DriverStatement], dialect: sa.Dialect, collation: str):
        self._statements = statements
        types: dict[str, Any] = {}
        for statement in statements:
            for parameter in statement.names:
                types.setdefault(parameter, statement.types[parameter])
        declared = []
        for parameter, type_ in types.items():
            spelled = type_.compile(dialect=dialect)
            if "CHAR" in spelled or "TEXT" in spelled:
                spelled += f" CHARACTER SET utf8mb4 COLLATE {collation}"
            declared.append(f"p_{parameter} {spelled}")
        first, *rest = (statement.spelled(lambda parameter: f"p_{parameter}") for statement in statements)
        definition = (
            f"({', '.join(declared)}) SQL SECURITY INVOKER BEGIN START TRANSACTION; {first}; "
            "IF ROW_COUNT() <> 1 THEN ROLLBACK; "
            f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{HEAD_NOT_MOVED}'; END IF; "
            f"{'; '.join(rest)}; COMMIT; END"
        )
        self.name = f"{name}_{hashlib.sha256(definition.encode()).hexdigest()[:12]}"
        self.created = f"CREATE PROCEDURE {self.name} {definition}"
        """The procedure's `CREATE PROCEDURE` statement."""
        self.sql = f"CALL {self.name}({', '.join(f'%({parameter})s' for parameter in types)})"
        """The call, its values by name (`params`), written in by `mysql_text.statement_text`."""

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return _merged(self._statements, values)

    def execute(self, driver: Any, values: Mapping[str, Any]) -> bool:
        """Whether the head moved and every statement ran (a PyMySQL connection in autocommit)."""
        try:
            driver.query(statement_text(self.sql, self.params(values), driver))
        except Exception as error:  # the driver's class for it: its number and message tell it apart
            if not head_not_moved(error):
                raise
            return False
        return True

    def create(self, connection: sa.Connection) -> None:
        """Create the procedure unless the database has it (made meanwhile by another process is
        as good); a `ValueError` saying what to grant when the account may not."""
        held = connection.exec_driver_sql(
            "SELECT 1 FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()"
            " AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME = %s",
            (self.name,),
        ).first()
        if held is not None:
            return
        try:
            connection.exec_driver_sql(self.created.replace("%", "%%"))
        except sa.exc.DBAPIError as error:
            number = None if error.orig is None else error.orig.args[0]
            if number in _ACCESS_DENIED:  # a line saying what to grant, not the procedure's text
                raise ValueError(
                    f"the database account may not create the ledger's append procedure {self.name} "
                    f"({error.orig}): grant it CREATE ROUTINE, or run `sessionledger migrate` once "
                    "as an account that may (docs/mariadb.md)"
                ) from None
            if number != _ALREADY_EXISTS:
                raise


def head_not_moved(error: Exception) -> bool:
    """Whether a driver's error is a `Procedure`'s `HEAD_NOT_MOVED` signal."""
    return tuple(error.args[:2]) == (_SIGNALED, HEAD_NOT_MOVED)


_BINARY_COPY_TYPES = {
    "TEXT": "text",
    "BIGINT": "int8",
    "INTEGER": "int4",
    "BOOLEAN": "bool",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
    "JSON": "text",  # the value is its canonical text (`schema.Json`), and json's binary form is its text
}
"""The type psycopg writes a column's values as in a binary COPY, by the column's SQL type."""


@functools.cache
def _inline_insert(table: sa.Table) -> sa.Insert:
    """The table's INSERT, nothing fetched back: one per table (`compiled` keys on it)."""
    return table.insert().inline()


class BulkInsert:
    """Many rows into one table in one round trip, inside the caller's transaction: PostgreSQL's
    `COPY ... FROM STDIN` in its binary format (the server's fastest way in, with no statement
    executed per row; the binary format spares the client the text of every timestamp and the
    escaping of every payload, 4.8 -> 1.5 us of a ledger row's client CPU), and on SQLite, which
    has no network to save, the table's INSERT as an executemany. Either way each value is
    converted by its column's type, as `DriverStatement` converts it."""

    def __init__(self, table: sa.Table, dialect: sa.Dialect, columns: Sequence[str]) -> None:
        self._columns = tuple(columns)
        self._insert = compiled(_inline_insert(table), dialect, self._columns)
        quote = dialect.identifier_preparer
        self._copy = (
            f"COPY {quote.format_table(table)} ({', '.join(map(quote.quote, self._columns))}) "
            "FROM STDIN (FORMAT BINARY)"
            if dialect.name == "postgresql"
            else None
        )
        self._copy_types = (
            [_BINARY_COPY_TYPES[table.c[name].type.compile(dialect=dialect)] for name in self._columns]
            if self._copy is not None
            else []
        )

    def write(self, driver: Any, rows: Iterable[Mapping[str, Any]]) -> None:
        if self._copy is None:
            driver.cursor().executemany(self._insert.sql, [self._insert.params(row) for row in rows])
            return
        converted = self._insert.converted(self._columns)
        with driver.cursor().copy(self._copy) as copy:
            copy.set_types(self._copy_types)
            for row in rows:
                copy.write_row(
                    [row[name] if convert is None else convert(row[name]) for name, convert in converted]
                )


def pipelined(driver: Any) -> AbstractContextManager[Any]:
    """Statements sent without waiting for each result (psycopg's pipeline mode: one round trip
    for the lot, errors raised at the end); as they come on SQLite, which has no network."""
    return driver.pipeline() if hasattr(driver, "pipeline") else nullcontext()


def driver_of(pooled: PoolProxiedConnection) -> Any:
    """The driver's own connection under a checked-out pool connection.

    Typed `Any`: psycopg's and sqlite3's connections share no typed interface beyond PEP 249's,
    and the hot paths use what each adds (pipelines, binary cursors, `autocommit`).
    """
    driver = pooled.dbapi_connection
    if driver is None:  # only after `invalidate()`, which no caller does before using it
        raise RuntimeError("the database connection was invalidated")
    return driver


@contextmanager
def write_transaction(engine: sa.Engine) -> Iterator[Any]:
    """A write transaction on a pooled DBAPI connection, without a SQLAlchemy `Connection`.

    SQLite connections run with the driver's own transaction handling off (see `engine.py`), so
    the write lock is taken here with BEGIN IMMEDIATE; psycopg begins implicitly.
    """
    pooled = engine.raw_connection()
    driver = driver_of(pooled)
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


class Autocommit:
    """Pooled DBAPI connections in autocommit mode: each statement is its own transaction (and its
    own snapshot), so one statement is one round trip, with no BEGIN and no COMMIT.

    One connection stays checked out, and switched, between calls: whoever finds it free uses it.
    A pool checkout with its events and the switch cost 12-15 us, about 3% of a one-event append,
    which is one statement. A caller who finds it taken (another thread, or a call nested in one)
    checks out a connection of its own, as every call did before. A caller reads its results to the
    end inside the block, as with any pooled connection. The kept connection goes back to the pool
    after an error and when unused for `PING_AFTER_IDLE_SECONDS` (the pool's idle check then pings
    it before it is used again), and is dropped for a new one when the server closed it
    (`check_pooled_connections`' `closed`, asked at every use: a poll, no round trip), so that an
    append after a database restart is not sent on a dead connection. A forked process forgets it,
    as `engine.dispose(close=False)` forgets the pool's.

    SQLite connections never begin a transaction implicitly (see `engine.py`): nothing to switch.

    On a partitioned PostgreSQL ledger the kept connection also runs its prepared statements with
    generic plans (`GENERIC_PLANS`) while it is kept: the append's plan then covers every partition
    of `sessions`, which PostgreSQL's plan cache costs above a plan pruned to one, so once those
    partitions hold a few thousand sessions it planned the append afresh at every call, a third of
    its time (bench_scale: 0.74-0.80 of an empty ledger's append rate at 10,000,000 events). The
    statements the kept connection runs are all lookups of one session, whose generic plan is the
    pruned one's; the setting is reset before the connection goes back to the pool.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._switch = engine.dialect.name != "sqlite"
        self._lock = threading.Lock()
        self._kept: PoolProxiedConnection | None = None
        self._last_used = 0.0
        self._server_closed = _server_closed.get(engine)  # None: SQLite, which has no server
        self._generic: bool | None = None if engine.dialect.name == "postgresql" else False
        """Whether the kept connection takes `GENERIC_PLANS` (a partitioned PostgreSQL ledger);
        `None` until the first connection is kept."""
        forget_in_children(self, Autocommit._forget_parent)

    def __call__(self) -> AbstractContextManager[Any]:
        """A driver connection for the block: the kept one when it is free, else one checked out
        for the block."""
        if self._lock.acquire(blocking=False):
            return _KeptUse(self)
        return self._checked_out()

    def close(self) -> None:
        """Give the kept connection back to the pool (before the engine is disposed)."""
        with self._lock:
            self._give_back()

    def _take(self) -> Any:
        """The kept connection, checked out again when it cannot be reused; called under the lock."""
        if self._kept is not None and time.monotonic() - self._last_used > PING_AFTER_IDLE_SECONDS:
            self._give_back()
        elif self._kept is not None and self._closed_by_server(self._kept):
            pooled, self._kept = self._kept, None
            pooled.invalidate()  # closed and forgotten by the pool, which opens another in its place
        if self._kept is None:
            self._kept = self._switched()
            if self._generic is None:
                self._generic = _partitioned(driver_of(self._kept))
            if self._generic:
                driver_of(self._kept).execute(GENERIC_PLANS)
        return driver_of(self._kept)

    def _forget_parent(self) -> None:
        """In a forked child: the kept connection is the parent's, severed here from its pool
        record as SQLAlchemy's recipe for forks severs one (`dbapi_connection = None` on both), so
        that its collection neither rolls it back nor closes it, which would send a ROLLBACK or a
        goodbye on the parent's socket (PyMySQL's rollback always sends one); and no lock held by
        a thread that stayed in the parent."""
        self._lock = threading.Lock()
        kept, self._kept = self._kept, None
        if kept is not None:
            record = kept._connection_record  # the fairy's own (SQLAlchemy has no public name for it)
            if record is not None:
                record.dbapi_connection = None
            kept.dbapi_connection = None  # type: ignore[misc]  # typed as never None; the recipe sets it so

    def _closed_by_server(self, pooled: PoolProxiedConnection) -> bool:
        return self._server_closed is not None and self._server_closed(driver_of(pooled))

    def _give_back(self) -> None:
        pooled, self._kept = self._kept, None
        if pooled is not None:
            self._release(pooled, reset=PLANS_RESET if self._generic else None)

    @contextmanager
    def _checked_out(self) -> Iterator[Any]:
        pooled = self._switched()
        try:
            yield driver_of(pooled)
        finally:
            self._release(pooled)

    def _switched(self) -> PoolProxiedConnection:
        """A connection checked out of the pool and switched to autocommit (`_release` undoes both)."""
        pooled = self._engine.raw_connection()
        if self._switch:
            _set_autocommit(driver_of(pooled), True)
        return pooled

    def _release(self, pooled: PoolProxiedConnection, reset: str | None = None) -> None:
        try:
            if reset is not None:
                driver_of(pooled).execute(reset)
            if self._switch:
                _set_autocommit(driver_of(pooled), False)
        except Exception:  # a broken connection: never hand it out again
            pooled.invalidate()
        pooled.close()


GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"
"""PostgreSQL's prepared statements planned once, not per call (`Autocommit`, `loop_postgres.py`)."""
PLANS_RESET = "RESET plan_cache_mode"


def _partitioned(driver: Any) -> bool:
    """Whether the PostgreSQL ledger on this connection (in autocommit) is hash-partitioned."""
    found = driver.execute(
        "SELECT EXISTS (SELECT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent "
        "WHERE c.relname = 'sessions' AND c.relnamespace = current_schema()::regnamespace)"
    ).fetchone()
    return bool(found and found[0])


def _set_autocommit(driver: Any, on: bool) -> None:
    """Autocommit on or off: psycopg's `autocommit` is an attribute, PyMySQL's a method (one round
    trip either way, only when it changes)."""
    if callable(driver.autocommit):
        driver.autocommit(on)
    else:
        driver.autocommit = on


class _KeptUse:
    """One block's use of `Autocommit`'s kept connection, whose lock the caller holds: released
    when the block ends, the connection given back after an error. A class, not a generator
    context manager: this wraps every append."""

    __slots__ = ("_owner",)

    def __init__(self, owner: Autocommit) -> None:
        self._owner = owner

    def __enter__(self) -> Any:
        try:
            return self._owner._take()
        except BaseException:
            self._owner._lock.release()
            raise

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        owner = self._owner
        try:
            if kind is None:
                owner._last_used = time.monotonic()
            else:
                owner._give_back()
        finally:
            owner._lock.release()
