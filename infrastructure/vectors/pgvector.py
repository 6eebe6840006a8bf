"""The vector store on PostgreSQL with the pgvector extension (what production runs)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import psycopg
from sessionledger.infrastructure.vectors.entries import Embeddings, Query
from sessionledger.infrastructure.vectors.sql_store import Row, SqlVectorStore

_SEARCH = """SELECT message_type, text FROM {table} WHERE user_id = %(user)s{conversation}
ORDER BY embedding <=> %(vector)s, id LIMIT %(k)s"""
_IN_CONVERSATION = " AND conversation_id = %(conversation)s"
"""Added only when a search names a conversation: one plan per query text, each using the B-tree."""


class PgVectorStore(SqlVectorStore[psycopg.Connection[Any]]):
    """Messages and embeddings in a PostgreSQL table with a pgvector `vector(N)` column.

    The extension and the table are created on first use (the table when the first vector gives
    its dimension `N`), with a B-tree on (user, conversation). A search reads that user's rows
    (and conversation's) through it and orders them by cosine distance (`<=>`): exact nearest
    neighbours, whose cost grows with the user's own messages, not with the table. An HNSW index
    would answer a query over the whole table faster, but a filter to one user among many makes
    it walk most of the graph (measured: slower than the exact read of the user's rows), and it
    is approximate. `url` is a PostgreSQL URL (the `+psycopg` form too); a server without the
    extension installed is a `ValueError` that says how to get it.
    """

    def __init__(self, url: str, embeddings: Embeddings, *, table: str = "chat_memory_vectors") -> None:
        super().__init__(embeddings)
        if not isinstance(table, str) or not table.isidentifier():
            raise ValueError("table must be a plain SQL identifier")
        from pgvector.psycopg import register_vector

        self._table = table
        self._connection = psycopg.connect(
            url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True
        )
        try:
            self._connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.FeatureNotSupported:
            info = self._connection.info
            message = _no_pgvector(info.host, info.port, info.server_version)
            self._connection.close()
            raise ValueError(message) from None
        register_vector(self._connection)
        self._dimension = self._stored_dimension()

    def _stored_dimension(self) -> int | None:
        row = self._connection.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
            (self._table,),
        ).fetchone()
        return int(row[0]) if row else None

    def _ensure_table(self, dimension: int) -> None:
        if self._dimension is None:
            with self._connection.transaction():
                self._connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._table,))
                self._connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._table} (id bigserial PRIMARY KEY,"
                    " user_id text NOT NULL, conversation_id text NOT NULL,"
                    " message_type text NOT NULL, text text NOT NULL,"
                    f" embedding vector({dimension}) NOT NULL)"
                )
                self._connection.execute(
                    f"CREATE INDEX IF NOT EXISTS {self._table}_owner"
                    f" ON {self._table} (user_id, conversation_id)"
                )
            self._dimension = self._stored_dimension()
        if self._dimension != dimension:
            raise ValueError(
                f"{self._table} holds vectors of dimension {self._dimension}, the embedder gave {dimension}"
            )

    def _held_dimension(self) -> int | None:
        if self._dimension is None:  # another process may have created the table since
            self._dimension = self._stored_dimension()
        return self._dimension

    def _encoded(self, vector: list[float]) -> Any:
        return as_pgvector(vector)

    def _insert(self, rows: Sequence[Row], dimension: int) -> None:
        self._ensure_table(dimension)
        with self._connection.transaction(), self._connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self._table} (user_id, conversation_id, message_type, text, embedding)"
                " VALUES (%s, %s, %s, %s, %s)",
                rows,
            )

    def _nearest(self, q: Query, vector: list[float]) -> Sequence[tuple[str, str]]:
        params = {
            "vector": self._encoded(vector),
            "user": q.user_id,
            "conversation": q.conversation_id,
            "k": q.top_k,
        }
        sql = _SEARCH.format(
            table=self._table, conversation=_IN_CONVERSATION if q.conversation_id is not None else ""
        )
        return self._connection.execute(sql, params).fetchall()


def _no_pgvector(host: str, port: int, server_version: int) -> str:
    """What the server lacks and the ways to get it, in one line."""
    major = server_version // 10000
    return (
        f"PostgreSQL at {host}:{port} has no pgvector extension: install it (Debian: "
        f"postgresql-{major}-pgvector, or https://github.com/pgvector/pgvector) and run CREATE EXTENSION "
        "vector, or use SQLite (sqlite-vec)"
    )


def as_pgvector(values: list[float]) -> Any:
    """`values` as the pgvector package's `Vector`, which `register_vector` sends as a `vector`.

    The class is top-level from pgvector 0.4 and in `pgvector.utils` before it; both are found,
    because langchain-postgres (in the `bench` extra) still pins pgvector below 0.4."""
    package = importlib.import_module("pgvector")
    vector_class = getattr(package, "Vector", None) or importlib.import_module("pgvector.utils").Vector
    return vector_class(values)
