"""The keyed vectors of a `memory://` store: in process memory, scored with numpy (exact)."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Sequence

import numpy as np
from sessionledger.infrastructure.vectors.keyed import KeyedChange, Scored, checked_search, checked_write

__all__ = ["InMemoryKeyedVectors"]

_Label = tuple[str, str, str]
"""namespace, key, field"""


class _Owner:
    """One owner's vectors by (namespace, key): the position that set them and one per field; and
    the matrices a search multiplies (made again after a write)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], tuple[int, dict[str, list[float]]]] = {}
        self.marks: dict[str, int] = {}
        self.matrices: dict[int, tuple[list[_Label], np.ndarray]] | None = None

    def matrix(self, dims: int) -> tuple[list[_Label], np.ndarray]:
        """The labels and unit vectors (zero vectors stay zero) of dimension `dims`."""
        if self.matrices is None:
            grouped: dict[int, list[tuple[_Label, list[float]]]] = {}
            for (namespace, key), (_, fields) in self.keys.items():
                for field, vector in fields.items():
                    grouped.setdefault(len(vector), []).append(((namespace, key, field), vector))
            self.matrices = {}
            for size, rows in grouped.items():
                matrix = np.array([vector for _, vector in rows], dtype=np.float64)
                norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                np.divide(matrix, norms, out=matrix, where=norms > 0)
                self.matrices[size] = ([label for label, _ in rows], matrix)
        return self.matrices.get(dims, ([], np.zeros((0, dims))))


class InMemoryKeyedVectors:
    """`KeyedVectors` in a dict per owner; a search scores every vector of the owner's under the
    prefix at once (one matrix product), so it is exact, as the SQL backends are."""

    def __init__(self) -> None:
        self._owners: dict[str, _Owner] = {}
        self._lock = threading.Lock()

    def write(
        self,
        owner: str,
        namespace: str,
        changes: Sequence[KeyedChange],
        *,
        through: int,
        cleared_before: int | None = None,
    ) -> None:
        owner, namespace, checked, through, cleared_before = checked_write(
            owner, namespace, changes, through, cleared_before
        )
        with self._lock:
            held = self._owners.setdefault(owner, _Owner())
            held.matrices = None
            if cleared_before is not None:
                erased = [w for w, (p, _) in held.keys.items() if w[0] == namespace and p < cleared_before]
                for where in erased:
                    del held.keys[where]
            for key, position, fields in checked:
                where = (namespace, key)
                if where in held.keys and held.keys[where][0] > position:
                    continue  # a newer change of the key is held
                if fields:
                    held.keys[where] = (position, dict(fields))
                else:
                    held.keys.pop(where, None)
            held.marks[namespace] = max(held.marks.get(namespace, 0), through)

    def search(
        self, owner: str, prefix: str, vector: Sequence[float], *, limit: int, offset: int = 0
    ) -> list[Scored]:
        owner, prefix, query, limit, offset = checked_search(owner, prefix, vector, limit, offset)
        with self._lock:
            held = self._owners.get(owner)
            if held is None:
                return []
            labels, matrix = held.matrix(len(query))
        q = np.array(query, dtype=np.float64)
        norm = float(np.linalg.norm(q))
        scores = matrix @ (q / norm) if norm > 0 else np.zeros(len(labels))
        best: dict[tuple[str, str], float] = {}
        for (namespace, key, _), score in zip(labels, scores.tolist(), strict=True):
            if namespace.startswith(prefix) and score > best.get((namespace, key), -2.0):
                best[(namespace, key)] = score
        top = heapq.nsmallest(offset + limit, best.items(), key=lambda pair: (-pair[1], pair[0]))
        return [Scored(namespace, key, score) for (namespace, key), score in top[offset:]]

    def synced(self, owner: str, namespace: str) -> int:
        with self._lock:
            held = self._owners.get(owner)
            return 0 if held is None else held.marks.get(namespace, 0)

    def clear(self, owner: str) -> None:
        with self._lock:
            self._owners.pop(owner, None)

    def close(self) -> None:
        """Nothing to release: the vectors go with the object."""
