"""`LedgerStore`'s semantic search through a vector store: the keyed vectors kept in step with the
ledger, and the candidates a search with a `query` reads from them.

The ledger stays the source of truth: each item's vectors are recorded with it, and the keyed
vectors (`vectors.keyed`) are derived from those records. Each namespace's vectors carry a mark,
the ledger position they reflect; whoever finds the mark behind the ledger (the writer right after
its append, a reader before a search, a store that finds the table emptied) applies the entry log
after it. So a crash between an append and its vectors, another process's writes, or a lost table
cost one catch-up, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from langgraph.store.base import SearchOp
from sessionledger.domain.entries import EntryRow
from sessionledger.infrastructure.langgraph.store_items import (
    APPLIES_TO,
    EXPIRED,
    ITEM_TYPE,
    Newest,
    Stored,
    matches,
    namespace_prefix,
    similarity,
)
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.vectors.keyed import KeyedChange, KeyedVectors

__all__ = ["ItemVectors", "changes"]

SCORE_SLACK = 1e-4
"""How far a vector store's score (float32 in sqlite-vec and pgvector) may sit from the ledger's
(float64): a search reads on while an unread candidate could still come within this of the page."""

FIRST_READ = 32
"""The fewest candidates a search asks for at once (then four times as many each time: each read
compares every vector under the prefix, so few reads matter more than few rows)."""


FILTERED = 8
"""How many times more a filtered search reads first: a filter passes only some candidates, and one
larger read costs less than the several small ones it spares."""


def changes(rows: Iterable[EntryRow]) -> tuple[list[KeyedChange], int | None]:
    """What entry log rows (oldest first) make of the keyed vectors: each key's last change (its
    recorded vectors, or none once forgotten or expired) and the position of the last forget of
    every key (a namespace's erasure), before which all is cleared.

    An entry written from a read (`APPLIES_TO`) applies as the store's mirror applies it
    (`Newest`): a refresh changes no vectors, an expiry drops them. Whether it applies is known
    from rows that hold the entry it was read from, so `ItemVectors.sync` reads the whole log when
    an expiry is among the new rows (a refresh is passed over either way)."""
    last: dict[str, KeyedChange] = {}
    newest = Newest()
    cleared: int | None = None
    for row in rows:
        if row.entry is not None:
            key, value = row.entry.key, row.entry.value
            taken = newest.take(key, value, row.position)
            if taken == "removed":
                last[key] = KeyedChange(key, row.position, {})
            elif taken == "set" and APPLIES_TO not in value:  # a refresh keeps the vectors it refreshes
                last[key] = KeyedChange(key, row.position, value.get("vectors") or {})
        elif row.forget is not None:
            forget = row.forget
            if forget.keys is None and not forget.prefix and forget.type in (None, ITEM_TYPE):
                cleared = row.position
            named = forget.keys if forget.keys is not None else list(last)
            for key in named:
                if forget.matches(ITEM_TYPE, key):
                    newest.forget(key)
                    last[key] = KeyedChange(key, row.position, {})
    return list(last.values()), cleared


def _needs_whole_log(row: EntryRow) -> bool:
    """A forget naming no keys, or an expiry: applied from the whole log (`ItemVectors.sync`)."""
    if row.forget is not None:
        return row.forget.keys is None
    return row.entry is not None and bool(row.entry.value.get(EXPIRED))


class ItemVectors:
    """One user's items' keyed vectors in a `KeyedVectors` (the owner is the user: another user's
    vectors never answer)."""

    def __init__(self, vectors: KeyedVectors, owner: str) -> None:
        self.vectors = vectors
        self._owner = owner

    def sync(
        self, service: SessionService, session_id: str, namespace: tuple[str, ...], upto: int | None = None
    ) -> None:
        """Bring the namespace's vectors up to the ledger `service` holds (to at least `upto`, when
        the caller knows how far the ledger goes). A forget that names no keys (an erasure, or a
        prefix) is applied by reading the whole log again, so that what it spared is kept, and so is
        a sweep's expiry, which applies only to the entry it was read from (`changes`)."""
        key = namespace_prefix(namespace)
        mark = self.vectors.synced(self._owner, key)
        if upto is not None and mark >= upto:
            return
        rows = service.entry_log(session_id, ITEM_TYPE, after=mark)
        if mark and any(_needs_whole_log(row) for row in rows):
            rows = service.entry_log(session_id, ITEM_TYPE)
        if rows:
            found, cleared = changes(rows)
            self.vectors.write(self._owner, key, found, through=rows[-1].position, cleared_before=cleared)

    def candidates(
        self,
        op: SearchOp,
        query: Sequence[float],
        live: Mapping[tuple[str, ...], Mapping[str, Stored]],
    ) -> tuple[list[Stored], dict[tuple[tuple[str, ...], str], float]]:
        """The items `ranked` needs to answer `op` exactly as it would from every live item: the
        vector store's best that pass the filter, read until the page is full and no unread one
        could reach it (ties included), and every item without vectors (they fill a short page).
        A candidate counts only as the ledger holds it (`live`): a vector the store still holds
        for a deleted, expired or changed item never answers for it. With them, the similarities
        of those that have vectors (computed here from the recorded vectors, for `ranked`)."""
        by_label = {namespace_prefix(ns): items for ns, items in live.items()}
        wanted = op.offset + op.limit
        chosen: dict[tuple[tuple[str, ...], str], Stored] = {}
        scores: dict[tuple[tuple[str, ...], str], float] = {}
        read, batch = 0, max(FIRST_READ, 2 * wanted) * (FILTERED if op.filter else 1)
        prefix = namespace_prefix(op.namespace_prefix)
        while True:
            found = self.vectors.search(self._owner, prefix, query, limit=batch, offset=read)
            read += len(found)
            for hit in found:
                held = by_label.get(hit.namespace, {}).get(hit.key)
                if held is None or not held.vectors:
                    continue
                where = (held.item.namespace, held.item.key)
                if where not in chosen and matches(held.item.value, op.filter):
                    chosen[where] = held
                    scores[where] = similarity(query, held)
            if len(found) < batch:
                break
            if len(scores) >= wanted and found[-1].score + SCORE_SLACK < sorted(scores.values())[-wanted]:
                break
            batch *= 4
        scoreless = [s for items in live.values() for s in items.values() if not s.vectors]
        return [*chosen.values(), *scoreless], scores
