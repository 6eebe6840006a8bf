"""The vector store for `memory://`: every stored vector compared to the query (brute force)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from sessionledger.domain.messages import Message
from sessionledger.infrastructure.vectors.entries import (
    Embeddings,
    Entry,
    cosine_distance,
    embedded,
    entries,
    query,
    same_dimension,
)


class InMemoryVectorStore:
    """Messages and their embeddings in process memory; a search compares the query with every
    vector of that user (cosine distance, nearest first), so it is exact and O(n). The first
    vectors stored fix the dimension, as a pgvector column does."""

    def __init__(self, embeddings: Embeddings) -> None:
        if embeddings is None:
            raise ValueError("embeddings cannot be null")
        self._embeddings = embeddings
        self._rows: list[tuple[Entry, list[float]]] = []
        self._dimension: int | None = None
        self._lock = threading.Lock()

    def add(self, conversation_id: str, messages: Iterable[Message], *, user_id: str) -> None:
        new = entries(conversation_id, messages, user_id)
        if not new:
            return
        vectors = embedded(self._embeddings, [entry.text for entry in new])
        with self._lock:
            same_dimension(self._dimension, len(vectors[0]), "the embedder's vectors have")
            self._dimension = len(vectors[0])
            self._rows.extend(zip(new, vectors, strict=True))

    def search(
        self, text: str, *, user_id: str, top_k: int = 4, conversation_id: str | None = None
    ) -> list[Message]:
        q = query(text, user_id, top_k, conversation_id)
        with self._lock:
            rows = [
                row
                for row in self._rows
                if row[0].user_id == q.user_id
                and (q.conversation_id is None or row[0].conversation_id == q.conversation_id)
            ]
        if not rows:
            return []
        (vector,) = embedded(self._embeddings, [q.text])
        same_dimension(self._dimension, len(vector), "the query has")
        rows.sort(key=lambda row: cosine_distance(vector, row[1]))
        return [entry.message() for entry, _ in rows[: q.top_k]]
