"""The keyed vector API every vector store offers beside its chat memory: vectors by owner,
namespace, key and field path, replaced and deleted by key, searched by cosine similarity under a
namespace prefix; and the checks of its arguments, which every backend shares."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sessionledger.infrastructure.vectors.entries import checked_user

__all__ = [
    "KeyedChange",
    "KeyedVectors",
    "Scored",
    "beside_ledger",
    "checked_search",
    "checked_write",
    "keyed_vectors",
]

MAX_ROWS = 2**31 - 1
"""The most a search's `limit` or `offset` may be: within every backend's integer."""


@dataclass(frozen=True, slots=True)
class KeyedChange:
    """What the source of truth (the ledger) says of one key at `position`: its vectors by field
    path from then on; none when the key was deleted or has nothing to index. A change older than
    one the store already holds for the key is ignored, so changes may arrive twice or late."""

    key: str
    position: int
    vectors: Mapping[str, Sequence[float]]


@dataclass(frozen=True, slots=True)
class Scored:
    """A search's answer: a key under the prefix and its best field's cosine similarity."""

    namespace: str
    key: str
    score: float


@runtime_checkable
class KeyedVectors(Protocol):
    """Vectors kept per owner (one owner's never answer another's search), each namespace marked
    with the position up to which it reflects the source (`synced`), so a reader can tell when to
    bring it up to date and a lost or emptied table is rebuilt rather than trusted."""

    def write(
        self,
        owner: str,
        namespace: str,
        changes: Sequence[KeyedChange],
        *,
        through: int,
        cleared_before: int | None = None,
    ) -> None:
        """In one transaction: with `cleared_before`, drop the namespace's vectors recorded before
        that position (the namespace was erased there); apply each change (the key's older vectors
        are replaced by its new ones); mark the namespace synced up to `through` (never lowered)."""
        ...

    def search(
        self, owner: str, prefix: str, vector: Sequence[float], *, limit: int, offset: int = 0
    ) -> list[Scored]:
        """The owner's keys in namespaces starting with `prefix` that hold vectors of `vector`'s
        dimension, by their best cosine similarity to it (highest first, then namespace and key),
        `offset` then `limit`."""
        ...

    def synced(self, owner: str, namespace: str) -> int:
        """The position up to which the namespace's vectors reflect the source (0: never written)."""
        ...

    def clear(self, owner: str) -> None:
        """Forget every vector and mark of the owner (to rebuild them from the source)."""
        ...

    def close(self) -> None: ...


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or "\x00" in value:
        raise ValueError(f"{what} must be a string without NUL, not {value!r}")
    return value


def _count(value: object, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_ROWS:
        raise ValueError(f"{what} must be an integer from {least} to {MAX_ROWS}, not {value!r}")
    return value


def _position(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, not {value!r}")
    return value


def checked_vector(value: object, what: str) -> list[float]:
    """The vector as floats; `ValueError` unless it is a non-empty sequence of finite reals."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValueError(f"{what} must be a list of numbers, not {type(value).__name__}")
    items = list(value)
    if not items or not all(
        isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) for x in items
    ):
        raise ValueError(f"{what} must be a non-empty list of finite numbers")
    return [float(x) for x in items]


Checked = tuple[str, int, list[tuple[str, list[float]]]]
"""A checked change: key, position, (field, vector) pairs."""


def checked_write(
    owner: object, namespace: object, changes: object, through: object, cleared_before: object
) -> tuple[str, str, list[Checked], int, int | None]:
    """`write`'s arguments checked before anything is written: `ValueError` naming the first fault."""
    owner = checked_user(owner)
    namespace = _name(namespace, "namespace")
    if isinstance(changes, str | bytes) or not isinstance(changes, Iterable):
        raise ValueError("changes must be a sequence of KeyedChange")
    checked: list[Checked] = []
    for change in changes:
        if not isinstance(change, KeyedChange):
            raise ValueError(f"changes must be KeyedChange values, not {type(change).__name__}")
        if not isinstance(change.vectors, Mapping):
            raise ValueError(f"the vectors of key {change.key!r} must map field paths to vectors")
        fields = [
            (_name(field, "a field path"), checked_vector(vector, f"the vector of {change.key!r}"))
            for field, vector in change.vectors.items()
        ]
        checked.append((_name(change.key, "key"), _position(change.position, "position"), fields))
    cleared = None if cleared_before is None else _position(cleared_before, "cleared_before")
    return owner, namespace, checked, _position(through, "through"), cleared


def checked_search(
    owner: object, prefix: object, vector: object, limit: object, offset: object
) -> tuple[str, str, list[float], int, int]:
    return (
        checked_user(owner),
        _name(prefix, "prefix"),
        checked_vector(vector, "the query vector"),
        _count(limit, "limit", 1),
        _count(offset, "offset", 0),
    )


def beside_ledger(database_url: str) -> str:
    """Where a ledger's keyed vectors go by default: its own PostgreSQL database (pgvector), a file
    beside a SQLite ledger's (`ledger.db-vectors`: SQLite through sqlite-vec may be a second SQLite
    library in the process, which must not share a file with the ledger's, `sqlite_vec.connect`),
    and memory for a ledger in memory or on MariaDB/MySQL (which have no vector index here: the
    vectors are derived data, caught up from the ledger by each process's first search)."""
    if database_url.startswith(("mysql", "mariadb")):
        return "memory://"
    if database_url.startswith("sqlite"):
        in_memory = database_url in ("sqlite://", "sqlite:///:memory:")
        return "sqlite:///:memory:" if in_memory else f"{database_url}-vectors"
    return database_url


def keyed_vectors(url: str) -> KeyedVectors:
    """The keyed vectors of a database URL: `memory://` in this process, a SQLite file through
    sqlite-vec, PostgreSQL through pgvector (`ExtensionMissing` without it); `ValueError` for any
    other URL."""
    if url == "memory://":
        from sessionledger.infrastructure.vectors.keyed_memory import InMemoryKeyedVectors

        return InMemoryKeyedVectors()
    if url.startswith("sqlite"):
        from sessionledger.infrastructure.vectors.sqlite_vec import SqliteKeyedVectors

        return SqliteKeyedVectors(":memory:" if url in ("sqlite://", "sqlite:///:memory:") else url)
    if url.startswith("postgresql"):
        from sessionledger.infrastructure.vectors.pgvector import PgKeyedVectors

        return PgKeyedVectors(url)
    raise ValueError(f"no vector store for {url!r}: use memory://, sqlite:///path or postgresql://...")
