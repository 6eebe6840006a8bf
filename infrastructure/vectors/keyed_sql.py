"""What the two SQL backends of the keyed vectors share: the statements (written once, in
SQLite's `:name` style, which the PostgreSQL backend rewrites to psycopg's), the argument checks
and the one locked connection. A backend says how it computes a cosine distance and a dimension,
encodes a vector, and runs statements in a transaction."""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Self

from sessionledger.infrastructure.vectors.keyed import KeyedChange, Scored, checked_search, checked_write
from sessionledger.infrastructure.vectors.schema import KEYED_MARKS, KEYED_TABLE

__all__ = ["SqlKeyedVectors", "psycopg_style"]

_DROP_OLDER = f"""DELETE FROM {KEYED_TABLE}
WHERE owner = :owner AND namespace = :namespace AND key = :key AND position < :position"""
_INSERT = f"""INSERT INTO {KEYED_TABLE} (owner, namespace, key, field, position, embedding)
SELECT :owner, :namespace, :key, :field, :position, :embedding
WHERE NOT EXISTS (SELECT 1 FROM {KEYED_TABLE}
    WHERE owner = :owner AND namespace = :namespace AND key = :key AND position > :position)
ON CONFLICT (owner, namespace, key, field) DO UPDATE
SET position = excluded.position, embedding = excluded.embedding
WHERE excluded.position >= {KEYED_TABLE}.position"""
"""A key's vector, unless the key holds a newer change (whose fields it would mix with)."""
_CLEAR_BEFORE = f"""DELETE FROM {KEYED_TABLE}
WHERE owner = :owner AND namespace = :namespace AND position < :position"""
_MARK = f"""INSERT INTO {KEYED_MARKS} (owner, namespace, position) VALUES (:owner, :namespace, :position)
ON CONFLICT (owner, namespace) DO UPDATE SET position = excluded.position
WHERE excluded.position > {KEYED_MARKS}.position"""
_SYNCED = f"SELECT position FROM {KEYED_MARKS} WHERE owner = :owner AND namespace = :namespace"
_CLEAR = tuple(f"DELETE FROM {table} WHERE owner = :owner" for table in (KEYED_TABLE, KEYED_MARKS))
_SEARCH = f"""SELECT namespace, key, MAX(1 - COALESCE(NULLIF({{distance}}, 'NaN'), 1)) AS score
FROM {KEYED_TABLE} WHERE owner = :owner AND substr(namespace, 1, :length) = :prefix AND {{dimension}} = :dims
GROUP BY namespace, key ORDER BY score DESC, namespace, key LIMIT :limit OFFSET :offset"""
"""Exact: every vector of the owner's under the prefix is compared (through the primary key's
owner column), the best field of each key kept. A zero vector has no cosine (sqlite-vec says NULL,
pgvector NaN): its distance is 1, as `entries.cosine_distance` and the memory store take it."""


def psycopg_style(sql: str) -> str:
    """`:name` parameters as psycopg's `%(name)s`."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


class SqlKeyedVectors(ABC):
    """`KeyedVectors` over one database connection, used under a lock (one statement at a time)."""

    distance = ""
    """The SQL of the cosine distance between the `embedding` column and the `:vector` parameter."""
    dimension = ""
    """The SQL of the `embedding` column's dimension."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @abstractmethod
    def _sql(self, sql: str) -> str:
        """The statement in the driver's parameter style."""

    @abstractmethod
    def _encoded(self, vector: list[float]) -> Any:
        """The vector as the driver takes it."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """A transaction on the connection, yielding a cursor (`execute`, `executemany`)."""

    @abstractmethod
    def _rows(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        """The rows of one statement run on its own."""

    @abstractmethod
    def close(self) -> None: ...

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
        where = {"owner": owner, "namespace": namespace}
        drops = [{**where, "key": key, "position": position} for key, position, _ in checked]
        inserts = [
            {**where, "key": key, "position": position, "field": field, "embedding": self._encoded(vector)}
            for key, position, fields in checked
            for field, vector in fields
        ]
        with self._lock, self._transaction() as cursor:
            if cleared_before is not None:
                cursor.execute(self._sql(_CLEAR_BEFORE), {**where, "position": cleared_before})
            if drops:
                cursor.executemany(self._sql(_DROP_OLDER), drops)
            if inserts:
                cursor.executemany(self._sql(_INSERT), inserts)
            cursor.execute(self._sql(_MARK), {**where, "position": through})

    def search(
        self, owner: str, prefix: str, vector: Sequence[float], *, limit: int, offset: int = 0
    ) -> list[Scored]:
        owner, prefix, query, limit, offset = checked_search(owner, prefix, vector, limit, offset)
        sql = self._sql(_SEARCH.format(distance=self.distance, dimension=self.dimension))
        params = {
            "owner": owner,
            "prefix": prefix,
            "length": len(prefix),
            "vector": self._encoded(query),
            "dims": len(query),
            "limit": limit,
            "offset": offset,
        }
        with self._lock:
            rows = self._rows(sql, params)
        return [Scored(namespace, key, float(score)) for namespace, key, score in rows]

    def synced(self, owner: str, namespace: str) -> int:
        with self._lock:
            rows = self._rows(self._sql(_SYNCED), {"owner": owner, "namespace": namespace})
        return int(rows[0][0]) if rows else 0

    def clear(self, owner: str) -> None:
        with self._lock, self._transaction() as cursor:
            for sql in _CLEAR:
                cursor.execute(self._sql(sql), {"owner": owner})

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
