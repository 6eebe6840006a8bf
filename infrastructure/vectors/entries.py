"""What every vector store shares: the checks of its arguments, which messages it keeps, and the
`Embeddings` protocol (so no backend repeats them)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sessionledger.domain.chat_window import checked_id, checked_messages
from sessionledger.domain.messages import Message, MessageType

STORED_TYPES = (MessageType.USER, MessageType.ASSISTANT)


class Embeddings(Protocol):
    """One vector per text, in order (`OpenAIEmbeddings`, or any object with this method)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored message: whose, which conversation, its type and text."""

    user_id: str
    conversation_id: str
    type: MessageType
    text: str

    def message(self) -> Message:
        return Message(self.type, self.text)


def checked_user(user_id: object) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")
    return user_id


def entries(conversation_id: str, messages: Iterable[Message], user_id: str) -> list[Entry]:
    """The messages a store keeps (user and assistant ones with text, as Spring's advisor converts
    them); blank ids and `None` messages are `ValueError`s with Spring's texts."""
    conversation_id = checked_id(conversation_id)
    user_id = checked_user(user_id)
    return [
        Entry(user_id, conversation_id, m.type, m.text)
        for m in checked_messages(messages)
        if m.type in STORED_TYPES and m.text and m.text.strip()
    ]


@dataclass(frozen=True, slots=True)
class Query:
    """A checked search: the text, whose messages, how many, and optionally one conversation."""

    text: str
    user_id: str
    top_k: int
    conversation_id: str | None


def query(text: object, user_id: object, top_k: object, conversation_id: object) -> Query:
    if not isinstance(text, str):
        raise ValueError("text must be a string")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise ValueError("top_k must be greater than 0")
    conversation = None if conversation_id is None else checked_id(conversation_id)
    return Query(text, checked_user(user_id), top_k, conversation)


def embedded(embeddings: Embeddings, texts: Sequence[str]) -> list[list[float]]:
    """The texts' vectors; an embedder that breaks its promise is refused before anything is stored."""
    vectors = embeddings.embed(list(texts))
    if len(vectors) != len(texts) or not all(all(math.isfinite(x) for x in v) for v in vectors):
        raise ValueError(f"the embedder gave {len(vectors)} usable vectors for {len(texts)} texts")
    return vectors


def cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """1 - cosine similarity (pgvector's `<=>`, sqlite-vec's `vec_distance_cosine`); 1 with a zero vector."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norm if norm else 1.0
