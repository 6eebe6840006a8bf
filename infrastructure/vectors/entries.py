"""What every vector store shares: the checks of its arguments, which messages it keeps, and the
`Embeddings` protocol (so no backend repeats them)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
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


MAX_TOP_K = 1000
"""The most messages one search returns: more than any prompt holds, and within every backend's
integer (`top_k=2**63` was an `OverflowError` on SQLite)."""


def query(text: object, user_id: object, top_k: object, conversation_id: object) -> Query:
    if not isinstance(text, str):
        raise ValueError("text must be a string")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise ValueError("top_k must be greater than 0")
    if top_k > MAX_TOP_K:
        raise ValueError(f"top_k must be at most {MAX_TOP_K}, got {top_k}")
    conversation = None if conversation_id is None else checked_id(conversation_id)
    return Query(text, checked_user(user_id), top_k, conversation)


def embedded(embeddings: Embeddings, texts: Sequence[str]) -> list[list[float]]:
    """The texts' vectors, checked before anything is stored or searched: one per text, each a
    non-empty sequence of finite real numbers, all of one dimension. An embedder that breaks its
    promise (strings, `None`, NaN, a short list, mixed sizes) is a `ValueError`."""
    vectors = embeddings.embed(list(texts))
    if not isinstance(vectors, list | tuple) or len(vectors) != len(texts):
        got = f"{len(vectors)} vectors" if isinstance(vectors, list | tuple) else type(vectors).__name__
        raise ValueError(f"the embedder gave {got} for {len(texts)} texts")
    checked = [_vector(vector, index) for index, vector in enumerate(vectors)]
    sizes = sorted({len(vector) for vector in checked})
    if len(sizes) > 1:
        raise ValueError(f"the embedder gave vectors of dimensions {sizes} in one answer")
    return checked


def _vector(value: object, index: int) -> list[float]:
    """One vector as floats; `ValueError` naming it unless it is a non-empty sequence of finite
    real numbers (a numpy array's items are, a string's or a bool's are not)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValueError(f"the embedder's vector {index} is a {type(value).__name__}, not a list of numbers")
    items = list(value)
    if not items:
        raise ValueError(f"the embedder's vector {index} is empty")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Real) or not math.isfinite(item):
            raise ValueError(f"the embedder's vector {index} holds {item!r}, not a finite number")
    return [float(item) for item in items]


def same_dimension(held: int | None, given: int, what: str) -> None:
    """`ValueError` unless a store holding vectors of dimension `held` (`None`: none yet) can take
    `given` (`what` says whose they are, "the query has"): the first vectors stored fix it."""
    if held is not None and given != held:
        raise ValueError(f"the store holds vectors of dimension {held}; {what} dimension {given}")


def cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """1 - cosine similarity (pgvector's `<=>`, sqlite-vec's `vec_distance_cosine`); 1 with a zero vector."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 1.0 - dot / norm if norm else 1.0
