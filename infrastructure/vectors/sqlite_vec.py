"""The vector store on SQLite: rows in a plain table, distances computed by the `sqlite-vec` extension."""

from __future__ import annotations

import importlib
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from sessionledger.domain.messages import Message, MessageType
from sessionledger.infrastructure.vectors.entries import Embeddings, embedded, entries, query

_TABLE = """CREATE TABLE IF NOT EXISTS chat_memory_vectors (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    message_type TEXT NOT NULL,
    text TEXT NOT NULL,
    embedding BLOB NOT NULL
)"""
_INDEX = (
    "CREATE INDEX IF NOT EXISTS chat_memory_vectors_owner ON chat_memory_vectors (user_id, conversation_id)"
)
_SEARCH = """SELECT message_type, text FROM chat_memory_vectors
WHERE user_id = ? AND (? IS NULL OR conversation_id = ?) AND vec_length(embedding) = ?
ORDER BY vec_distance_cosine(embedding, ?), id LIMIT ?"""


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


class SqliteVecStore:
    """Messages and embeddings in a SQLite file (`sqlite:///path`, a path, or `:memory:`).

    A search reads that user's rows (and conversation's, when given) through an index and orders
    them by `vec_distance_cosine`: exact nearest neighbours, as sqlite-vec computes them, in SQL.
    Rows of another dimension than the query's (another embedding model) are not compared.
    """

    def __init__(self, database: str | Path, embeddings: Embeddings) -> None:
        if embeddings is None:
            raise ValueError("embeddings cannot be null")
        path = str(database)
        if path.startswith("sqlite:///"):
            path = path.removeprefix("sqlite:///")
        if not path:
            raise ValueError("database must name a SQLite file (sqlite:///path) or ':memory:'")
        import sqlite_vec

        driver = _driver()
        self._serialize = sqlite_vec.serialize_float32
        self._embeddings = embeddings
        self._lock = threading.Lock()
        self._connection: Any = driver.connect(path, check_same_thread=False, isolation_level=None)
        self._connection.enable_load_extension(True)
        sqlite_vec.load(self._connection)
        self._connection.enable_load_extension(False)
        with self._lock:
            self._connection.execute(_TABLE)
            self._connection.execute(_INDEX)

    def add(self, conversation_id: str, messages: Iterable[Message], *, user_id: str) -> None:
        new = entries(conversation_id, messages, user_id)
        if not new:
            return
        vectors = embedded(self._embeddings, [entry.text for entry in new])
        rows = [
            (e.user_id, e.conversation_id, e.type.value, e.text, self._serialize(v))
            for e, v in zip(new, vectors, strict=True)
        ]
        with self._lock:
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

    def search(
        self, text: str, *, user_id: str, top_k: int = 4, conversation_id: str | None = None
    ) -> list[Message]:
        q = query(text, user_id, top_k, conversation_id)
        (vector,) = embedded(self._embeddings, [q.text])
        params = (
            q.user_id,
            q.conversation_id,
            q.conversation_id,
            len(vector),
            self._serialize(vector),
            q.top_k,
        )
        with self._lock:
            found = self._connection.execute(_SEARCH, params).fetchall()
        return [Message(MessageType(kind), body) for kind, body in found]

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> SqliteVecStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
