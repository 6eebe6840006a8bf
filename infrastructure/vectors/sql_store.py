"""What the two SQL vector stores share: the checked add and search around one locked connection."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar

from sessionledger.domain.messages import Message, MessageType
from sessionledger.infrastructure.vectors.entries import (
    Embeddings,
    Query,
    embedded,
    entries,
    query,
    same_dimension,
)


class _Closable(Protocol):
    def close(self) -> None: ...


ConnectionT = TypeVar("ConnectionT", bound=_Closable)

Row = tuple[str, str, str, str, Any]
"""One row to insert: user, conversation, message type, text, and the backend's encoded vector."""


class SqlVectorStore(ABC, Generic[ConnectionT]):
    """A vector store over one database connection, used under a lock (one statement at a time).

    `add` and `search` check their arguments, keep what every store keeps, embed it and check the
    dimension here (the first vectors stored fix it); a backend only says which dimension it holds
    (`_held_dimension`), encodes a vector (`_encoded`), inserts rows (`_insert`) and finds the
    nearest (`_nearest`), each called with the lock held. A subclass opens `_connection` in `__init__`.
    """

    _connection: ConnectionT

    def __init__(self, embeddings: Embeddings) -> None:
        if embeddings is None:
            raise ValueError("embeddings cannot be null")
        self._embeddings = embeddings
        self._lock = threading.Lock()

    @abstractmethod
    def _held_dimension(self) -> int | None:
        """The dimension of the vectors stored; `None` before the first."""

    @abstractmethod
    def _encoded(self, vector: list[float]) -> Any:
        """The vector as the driver takes it."""

    @abstractmethod
    def _insert(self, rows: Sequence[Row], dimension: int) -> None:
        """Stores the rows in one transaction."""

    @abstractmethod
    def _nearest(self, q: Query, vector: list[float]) -> Sequence[tuple[str, str]]:
        """The `q.top_k` (message type, text) nearest to `vector` among `q`'s user's (and conversation's)."""

    def add(self, conversation_id: str, messages: Iterable[Message], *, user_id: str) -> None:
        new = entries(conversation_id, messages, user_id)
        if not new:
            return
        vectors = embedded(self._embeddings, [entry.text for entry in new])
        rows = [
            (e.user_id, e.conversation_id, e.type.value, e.text, self._encoded(v))
            for e, v in zip(new, vectors, strict=True)
        ]
        with self._lock:
            same_dimension(self._held_dimension(), len(vectors[0]), "the embedder's vectors have")
            self._insert(rows, len(vectors[0]))

    def search(
        self, text: str, *, user_id: str, top_k: int = 4, conversation_id: str | None = None
    ) -> list[Message]:
        q = query(text, user_id, top_k, conversation_id)
        (vector,) = embedded(self._embeddings, [q.text])
        with self._lock:
            held = self._held_dimension()
            if held is None:
                return []
            same_dimension(held, len(vector), "the query has")
            found = self._nearest(q, vector)
        return [Message(MessageType(kind), body) for kind, body in found]

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
