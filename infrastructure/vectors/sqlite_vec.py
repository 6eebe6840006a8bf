"""The vector stores on SQLite (chat memory, keyed vectors): rows in plain tables, distances computed
by the `sqlite-vec` extension."""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from sessionledger.infrastructure.vectors.entries import Embeddings, Query
from sessionledger.infrastructure.vectors.keyed_sql import SqlKeyedVectors
from sessionledger.infrastructure.vectors.schema import migrate_vectors
from sessionledger.infrastructure.vectors.sql_store import Row, SqlVectorStore
from sqlalchemy.pool import StaticPool

_SEARCH = """SELECT message_type, text FROM chat_memory_vectors
WHERE user_id = ? AND (? IS NULL OR conversation_id = ?) AND vec_length(embedding) = ?
ORDER BY COALESCE(vec_distance_cosine(embedding, ?), 1), id LIMIT ?"""
"""A zero vector's distance is NULL in sqlite-vec, which sorts first: 1 here, as in the memory store."""
_FIRST_DIMENSION = "SELECT vec_length(embedding) FROM chat_memory_vectors ORDER BY id LIMIT 1"


def _driver() -> ModuleType:
    """The standard `sqlite3` when this Python lets it load extensions, else `sqlean` (from the
    `vector` extra: a `sqlite3` built with extension loading, for Pythons built without it)."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        return importlib.import_module("sqlean")
    except ImportError:
        raise RuntimeError(
            "this Python's sqlite3 cannot load extensions; install sessionledger[vector] (sqlean-py)"
        ) from None


def _serializer() -> Callable[[list[float]], bytes]:
    import sqlite_vec

    serialize: Callable[[list[float]], bytes] = sqlite_vec.serialize_float32
    return serialize


BUSY_TIMEOUT_MS = 30_000
"""How long a write waits for another connection's (as the ledger's SQLite engine waits)."""


def connect(database: str | Path) -> Any:
    """A connection (autocommit: statements issue their own BEGIN) to a SQLite file (`sqlite:///path`,
    a path, or `:memory:`) with sqlite-vec loaded and the vector tables migrated (`schema.py`, the
    ledger's migration runner) through this very connection, in WAL mode as a ledger is.

    Only this connection's SQLite library touches the file: where this Python's `sqlite3` cannot
    load extensions, the driver is `sqlean`, a second copy of SQLite in the process, and two copies
    on one file break each other's POSIX locks (closing one's descriptor drops the other's locks:
    "disk I/O error"). So keep a vector file apart from a ledger's file (`keyed.beside_ledger`).
    """
    path = str(database)
    if path.startswith("sqlite:///"):
        path = path.removeprefix("sqlite:///")
    if not path:
        raise ValueError("database must name a SQLite file (sqlite:///path) or ':memory:'")
    if path != ":memory:" and not Path(path).parent.is_dir():
        raise ValueError(f"cannot create the SQLite vector file {path}: no directory {Path(path).parent}")
    import sqlite_vec

    connection: Any = _driver().connect(
        path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
    )
    connection.enable_load_extension(True)
    sqlite_vec.load(connection)
    connection.enable_load_extension(False)
    connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if path != ":memory:":
        connection.execute("PRAGMA journal_mode=WAL")
    own = sa.create_engine("sqlite://", creator=lambda: connection, poolclass=StaticPool)

    @sa.event.listens_for(own, "begin")
    def _begin(_: sa.Connection) -> None:  # the write lock first, as the ledger's runner expects
        connection.execute("BEGIN IMMEDIATE")

    migrate_vectors(own)  # not disposed: that would close the connection
    return connection


class SqliteVecStore(SqlVectorStore[Any]):
    """Messages and embeddings in a SQLite file (`sqlite:///path`, a path, or `:memory:`), in the
    `chat_memory_vectors` table that opening creates or upgrades (`schema.py`, the ledger's
    migration runner; the file is then in WAL mode, as a ledger is).

    A search reads that user's rows (and conversation's, when given) through an index and orders
    them by `vec_distance_cosine`: exact nearest neighbours, as sqlite-vec computes them, in SQL.
    The first row's dimension is the store's (rows of another, stored before that was checked,
    are not compared).
    """

    def __init__(self, database: str | Path, embeddings: Embeddings) -> None:
        super().__init__(embeddings)
        self._serialize = _serializer()
        self._connection: Any = connect(database)

    def _held_dimension(self) -> int | None:
        row = self._connection.execute(_FIRST_DIMENSION).fetchone()
        return None if row is None else int(row[0])

    def _encoded(self, vector: list[float]) -> Any:
        return self._serialize(vector)

    def _insert(self, rows: Sequence[Row], dimension: int) -> None:
        self._connection.execute("BEGIN IMMEDIATE")
        try:
            self._connection.executemany(
                "INSERT INTO chat_memory_vectors"
                " (user_id, conversation_id, message_type, text, embedding) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        except BaseException:
            self._connection.execute("ROLLBACK")
            raise
        self._connection.execute("COMMIT")

    def _nearest(self, q: Query, vector: list[float]) -> Sequence[tuple[str, str]]:
        params = (
            q.user_id,
            q.conversation_id,
            q.conversation_id,
            len(vector),
            self._encoded(vector),
            q.top_k,
        )
        found: Sequence[tuple[str, str]] = self._connection.execute(_SEARCH, params).fetchall()
        return found


class SqliteKeyedVectors(SqlKeyedVectors):
    """`KeyedVectors` in a SQLite file's `keyed_vectors` table (`connect` migrates it), scored by
    sqlite-vec's `vec_distance_cosine` in SQL."""

    distance = "vec_distance_cosine(embedding, :vector)"
    dimension = "vec_length(embedding)"

    def __init__(self, database: str | Path) -> None:
        super().__init__()
        self._serialize = _serializer()
        self._connection = connect(database)

    def _sql(self, sql: str) -> str:
        return sql

    def _encoded(self, vector: list[float]) -> Any:
        return self._serialize(vector)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        self._connection.execute("BEGIN IMMEDIATE")
        try:
            yield self._connection
        except BaseException:
            self._connection.execute("ROLLBACK")
            raise
        self._connection.execute("COMMIT")

    def _rows(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        rows: Sequence[Sequence[Any]] = self._connection.execute(sql, params).fetchall()
        return rows

    def close(self) -> None:
        with self._lock:
            self._connection.close()
