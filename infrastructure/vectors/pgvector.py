"""The vector stores on PostgreSQL with the pgvector extension (what production runs): chat memory
and keyed vectors."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.vectors.entries import Embeddings, Query, same_dimension
from sessionledger.infrastructure.vectors.keyed_sql import SqlKeyedVectors, psycopg_style
from sessionledger.infrastructure.vectors.schema import TABLE, migrate_vectors
from sessionledger.infrastructure.vectors.sql_store import Row, SqlVectorStore

_SEARCH = f"""SELECT message_type, text FROM {TABLE} WHERE user_id = %(user)s{{conversation}}
ORDER BY COALESCE(NULLIF(embedding <=> %(vector)s, 'NaN'), 1), id LIMIT %(k)s"""
"""pgvector's distance to a zero vector is NaN, which sorts last: 1 here, as in the memory store."""
_IN_CONVERSATION = " AND conversation_id = %(conversation)s"
"""Added only when a search names a conversation: one plan per query text, each using the B-tree."""
_INSERT = (
    f"INSERT INTO {TABLE} (user_id, conversation_id, message_type, text, embedding)"
    " VALUES (%s, %s, %s, %s, %s)"
)
_COLUMN_DIMENSION = (
    f"SELECT atttypmod FROM pg_attribute WHERE attrelid = '{TABLE}'::regclass AND attname = 'embedding'"
)
_FIRST_DIMENSION = f"SELECT vector_dims(embedding) FROM {TABLE} ORDER BY id LIMIT 1"


def connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection to a PostgreSQL URL (the `+psycopg` form too) that sends and reads
    pgvector's `vector`, its database's vector tables migrated first (`schema.py`)."""
    from pgvector.psycopg import register_vector

    engine = create_ledger_engine(url, pool_size=1)
    try:
        migrate_vectors(engine)
    finally:
        engine.dispose()
    connection = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True)
    register_vector(connection)
    return connection


class PgVectorStore(SqlVectorStore[psycopg.Connection[Any]]):
    """Messages and embeddings in PostgreSQL's `chat_memory_vectors` table, in a pgvector column.

    Opening migrates the database's vector table (`schema.py`, the ledger's migration runner): the
    extension and the table, with a B-tree on (user, conversation); a server without the extension
    installed is an `ExtensionMissing` (a `ValueError`) that says in one line how to get it. The
    first vectors stored fix the dimension. A search reads that user's rows (and conversation's)
    through the B-tree and orders them by cosine distance (`<=>`): exact nearest neighbours, whose
    cost grows with the user's own messages, not with the table. An HNSW index would answer a
    query over the whole table faster, but a filter to one user among many makes it walk most of
    the graph (measured: slower than the exact read of the user's rows), and it is approximate.
    `url` is a PostgreSQL URL (the `+psycopg` form too).
    """

    def __init__(self, url: str, embeddings: Embeddings) -> None:
        super().__init__(embeddings)
        self._connection = connect(url)
        self._dimension = self._stored_dimension()

    def _stored_dimension(self) -> int | None:
        """The column's dimension (a table a store made before the migrations has one), else the
        first row's; `None` while the table is empty."""
        typed = self._connection.execute(_COLUMN_DIMENSION).fetchone()
        if typed and typed[0] > 0:
            return int(typed[0])
        first = self._connection.execute(_FIRST_DIMENSION).fetchone()
        return None if first is None else int(first[0])

    def _held_dimension(self) -> int | None:
        if self._dimension is None:  # another process may have stored the first vectors since
            self._dimension = self._stored_dimension()
        return self._dimension

    def _encoded(self, vector: list[float]) -> Any:
        return as_pgvector(vector)

    def _insert(self, rows: Sequence[Row], dimension: int) -> None:
        with self._connection.transaction(), self._connection.cursor() as cursor:
            if self._dimension is None:  # the first vectors: one process at a time may fix the dimension
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (TABLE,))
                same_dimension(self._stored_dimension(), dimension, "the embedder's vectors have")
            cursor.executemany(_INSERT, rows)
        self._dimension = dimension

    def _nearest(self, q: Query, vector: list[float]) -> Sequence[tuple[str, str]]:
        params = {
            "vector": self._encoded(vector),
            "user": q.user_id,
            "conversation": q.conversation_id,
            "k": q.top_k,
        }
        sql = _SEARCH.format(conversation=_IN_CONVERSATION if q.conversation_id is not None else "")
        return self._connection.execute(sql, params).fetchall()


class PgKeyedVectors(SqlKeyedVectors):
    """`KeyedVectors` in PostgreSQL's `keyed_vectors` table (`connect` migrates it; a server without
    pgvector is an `ExtensionMissing`), scored by pgvector's cosine distance (`<=>`) in SQL: exact,
    over the owner's rows under the prefix (read through the primary key's owner column)."""

    distance = "(embedding <=> :vector)"
    dimension = "vector_dims(embedding)"

    def __init__(self, url: str) -> None:
        super().__init__()
        self._connection = connect(url)

    def _sql(self, sql: str) -> str:
        return psycopg_style(sql)

    def _encoded(self, vector: list[float]) -> Any:
        return as_pgvector(vector)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._connection.transaction(), self._connection.cursor() as cursor:
            yield cursor

    def _rows(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        return self._connection.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._connection.close()


def as_pgvector(values: list[float]) -> Any:
    """`values` as the pgvector package's `Vector`, which `register_vector` sends as a `vector`.

    The class is top-level from pgvector 0.4 and in `pgvector.utils` before it; both are found,
    because langchain-postgres (in the `bench` extra) still pins pgvector below 0.4."""
    package = importlib.import_module("pgvector")
    vector_class = getattr(package, "Vector", None) or importlib.import_module("pgvector.utils").Vector
    return vector_class(values)
