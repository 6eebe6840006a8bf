"""What `LedgerStore` keeps of an item and the rules it reads items by, apart from where they live.

An item is one ledger entry of its namespace's session, keyed by the item's key; its payload
holds the value, the times, the time to live and the item's vectors.
Filters, namespace matching, ordering and scoring are plain functions of those payloads, shared by
the store's synchronous and asynchronous paths (and by nothing else, so no rule has two copies).
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Literal, TypeVar

from langgraph.store.base import Item, MatchCondition, SearchItem, SearchOp
from sessionledger.domain.entries import MAX_KEY_LENGTH, EntryRow
from sessionledger.infrastructure.vectors.entries import cosine_distance

T = TypeVar("T")

ITEM_TYPE = "langgraph.store.item"
"""The type of the ledger entries that hold items (in a namespace's session, keyed by item key)."""

NAMESPACE_TYPE = "langgraph.store.namespace"
"""The type of the entries of a user's directory session: one per namespace the user wrote to,
keyed by `namespace_prefix`, so a search under a prefix finds the namespaces below it."""


APPLIES_TO = "applies_to"
"""In an item entry written from a read (a TTL refresh, an expiry): the ledger position of the
entry it was read from. It applies only while that entry is still its key's newest, so a put or a
delete that another writer recorded in between wins, as on `PostgresStore`, where a refresh moves
the expiry of the row as it then is and a sweep deletes only what has expired at that moment."""

EXPIRED = "expired"
"""Set in the entry a sweep writes for an expired item (with `APPLIES_TO`): the item is gone."""


def applies(value: Mapping[str, Any], newest: int | None) -> bool:
    """Whether an item entry with `value` applies, its key's newest entry being at `newest`
    (`None`: the key holds none): always, unless it was written from a read (`APPLIES_TO`)."""
    read_from = value.get(APPLIES_TO)
    return read_from is None or read_from == newest


class Newest:
    """The ledger position of each live key's newest entry, kept as entry rows are read oldest
    first: the one place that decides what an entry does to its key, so the store's mirror and
    its vectors (`store_vectors.changes`) follow the same rule (`applies`)."""

    def __init__(self) -> None:
        self.positions: dict[str, int] = {}

    def take(self, key: str, value: Mapping[str, Any], position: int) -> Literal["set", "removed", "ignored"]:
        """What the entry at `position` does: sets its key's value, removes the key (an expiry),
        or nothing (written from a read of an entry that is no longer the key's newest)."""
        if not applies(value, self.positions.get(key)):
            return "ignored"
        if value.get(EXPIRED):
            self.positions.pop(key, None)
            return "removed"
        self.positions[key] = position
        return "set"

    def forget(self, key: str) -> None:
        self.positions.pop(key, None)


def namespace_prefix(namespace: Sequence[str]) -> str:
    """The directory key of `namespace`, and the key prefix of every namespace below it: each
    label then a period. Labels hold no period (langgraph refuses one), so `("a", "b")` gives
    `"a.b."`, which starts the keys of `("a", "b")` and `("a", "b", "c")` but not `("a", "bc")`.
    """
    return "".join(f"{label}." for label in namespace)


class Mirror(Generic[T]):
    """One session's live entries of one type as this process last read them (each value as
    `parse` makes it, once), and the ledger position read up to: `apply` the session's entry log
    after `position` to catch up.

    Why it is safe across processes: every read first asks the ledger for what was recorded after
    `position` (one indexed query, usually answered with no rows), so a write by any process is
    seen by the next read; the mirror only spares re-reading and re-parsing what did not change.
    """

    def __init__(self, entry_type: str, parse: Callable[[Mapping[str, Any], int], T]) -> None:
        """`parse(value, position)`: the value of the entry recorded at that ledger position."""
        self.entry_type = entry_type
        self.parse = parse
        self.position = 0
        self.live: dict[str, T] = {}
        self.newest = Newest()
        self.lock = threading.Lock()

    def apply(self, rows: Iterable[EntryRow]) -> None:
        """Apply log rows, oldest first: an entry is its key's value (`Newest.take` says when it
        is not), a forget removes the keys it matches (a session's erasure forgets all)."""
        for row in rows:
            if row.entry is not None:
                key, value = row.entry.key, row.entry.value
                taken = self.newest.take(key, value, row.position)
                if taken == "set":
                    self.live[key] = self.parse(value, row.position)
                elif taken == "removed":
                    self.live.pop(key, None)
            elif row.forget is not None:
                forget = row.forget
                for key in [k for k in self.live if forget.matches(self.entry_type, k)]:
                    self.live.pop(key, None)
                    self.newest.forget(key)
            self.position = max(self.position, row.position)


@dataclass(frozen=True, slots=True)
class Stored:
    """An item as the ledger holds it: the langgraph item, its time to live, its vectors, and the
    ledger position of the entry it was read from (0 for one not yet written)."""

    item: Item
    ttl_minutes: float | None
    expires_at: datetime | None
    vectors: Mapping[str, list[float]]
    position: int = 0

    def payload(self) -> dict[str, Any]:
        item = self.item
        return {
            "namespace": list(item.namespace),
            "key": item.key,
            "value": item.value,
            "created_at": item.created_at.isoformat(),
            "updated_at": item.updated_at.isoformat(),
            "ttl_minutes": self.ttl_minutes,
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
            "vectors": dict(self.vectors),
        }

    def refresh_payload(self) -> dict[str, Any]:
        """The entry of a read's refresh: the item, its expiry moved, for as long as the entry it
        was read from is its key's newest (`APPLIES_TO`)."""
        return {**self.payload(), APPLIES_TO: self.position}

    def expiry_payload(self) -> dict[str, Any]:
        """The entry of a sweep that found the item expired: it is gone, unless its key was
        written again since the sweep read it (`APPLIES_TO`)."""
        return {APPLIES_TO: self.position, EXPIRED: True}

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at < now

    def refreshed(self, now: datetime) -> Stored | None:
        """The item with its expiry moved to `now` plus its time to live; `None` without one."""
        if self.ttl_minutes is None:
            return None
        return Stored(self.item, self.ttl_minutes, expiry(now, self.ttl_minutes), self.vectors, self.position)


def stored(payload: Mapping[str, Any], position: int) -> Stored:
    """The `Stored` a payload written by `Stored.payload` holds, recorded at ledger `position`."""
    expires_at = payload.get("expires_at")
    return Stored(
        Item(
            value=dict(payload["value"]),
            key=payload["key"],
            namespace=tuple(payload["namespace"]),
            created_at=datetime.fromisoformat(payload["created_at"]),
            updated_at=datetime.fromisoformat(payload["updated_at"]),
        ),
        payload.get("ttl_minutes"),
        None if expires_at is None else datetime.fromisoformat(expires_at),
        payload.get("vectors") or {},
        position,
    )


def check_put(namespace: Sequence[str], key: str, minutes: object) -> None:
    """`ValueError` naming what a put cannot store, before anything of its batch is written: a
    namespace or key longer than an entry key may be (the namespace is the directory's key, each
    label then a period), or a `ttl` that is not `None` or a finite number of minutes whose expiry
    a date can hold (Python's own errors, `OverflowError` among them, named neither)."""
    label = namespace_prefix(namespace)
    if len(label) > MAX_KEY_LENGTH:
        raise ValueError(
            f"a namespace may hold at most {MAX_KEY_LENGTH} characters, counting a period after each "
            f"label; this one has {len(label)}: {label[:40]!r}..."
        )
    if isinstance(key, str) and len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"an item's key may hold at most {MAX_KEY_LENGTH} characters, not {len(key)}")
    if minutes is None:
        return
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not math.isfinite(minutes):
        raise ValueError(f"a put's ttl must be a finite number of minutes or None, not {minutes!r}")
    try:
        expiry(now(), minutes)
    except OverflowError:
        raise ValueError(f"a put's ttl of {minutes!r} minutes ends after the year 9999") from None


def expiry(now: datetime, ttl_minutes: float | None) -> datetime | None:
    return None if ttl_minutes is None else now + timedelta(minutes=float(ttl_minutes))


def now() -> datetime:
    return datetime.now(UTC)


# --- search ---------------------------------------------------------------------------------------


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a search filter, as langgraph's stores read one.

    A plain value asks for that exact JSON value at the key (a missing key matches nothing, as in
    PostgreSQL's `value->key = ...`); a mapping of operators (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`,
    `$lte`) asks each of them. Order operators compare numbers as numbers and strings as strings;
    a value of another type than the operand's does not match.
    """
    if not filter:
        return True
    for key, wanted in filter.items():
        if key not in value:
            return False
        held = value[key]
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            if not all(_holds(held, operator, operand) for operator, operand in wanted.items()):
                return False
        elif not _same_json(held, wanted):
            return False
    return True


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: `True` is not `1`, and `1` is `1.0` (as `jsonb` compares them)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _holds(held: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return _same_json(held, operand)
    if operator == "$ne":
        return not _same_json(held, operand)
    if operator not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"Unsupported operator: {operator}")
    if not ((_number(held) and _number(operand)) or (isinstance(held, str) and isinstance(operand, str))):
        return False
    if operator == "$gt":
        return bool(held > operand)
    if operator == "$gte":
        return bool(held >= operand)
    if operator == "$lt":
        return bool(held < operand)
    return bool(held <= operand)


def newest_first(items: Iterable[Stored]) -> list[Stored]:
    """Items by `updated_at`, newest first (`PostgresStore`'s order for a search without a query)."""
    return sorted(items, key=lambda s: s.item.updated_at, reverse=True)


def page(op: SearchOp, found: Sequence[Stored]) -> list[SearchItem]:
    """A search without a query: the filtered items newest first, `offset` then `limit`."""
    chosen = newest_first(s for s in found if matches(s.item.value, op.filter))
    return [_search_item(s, None) for s in chosen[op.offset : op.offset + op.limit]]


def similarity(query_vector: Sequence[float], s: Stored) -> float:
    """An item's score: its best vector's cosine similarity to the query (its vectors as the ledger
    recorded them, whatever a vector store holds)."""
    return max(1.0 - cosine_distance(query_vector, v) for v in s.vectors.values())


def ranked(
    op: SearchOp,
    found: Sequence[Stored],
    query_vector: Sequence[float],
    scores: Mapping[tuple[tuple[str, ...], str], float] | None = None,
) -> list[SearchItem]:
    """A search with a query: the filtered items by their best vector's cosine similarity to the
    query (highest first), `offset` then `limit`; as `InMemoryStore`, items without vectors fill
    the page after the scored ones, without a score. `scores`: the similarities of some of the
    items (by namespace and key) already computed."""
    known = scores or {}
    scored: list[tuple[float, Stored]] = []
    scoreless: list[Stored] = []
    for s in newest_first(x for x in found if matches(x.item.value, op.filter)):
        if s.vectors:
            score = known.get((s.item.namespace, s.item.key))
            scored.append((similarity(query_vector, s) if score is None else score, s))
        else:
            scoreless.append(s)
    scored.sort(key=lambda pair: pair[0], reverse=True)
    kept: list[tuple[float | None, Stored]] = list(scored[op.offset : op.offset + op.limit])
    if len(kept) < op.limit:
        kept.extend((None, s) for s in scoreless[: op.limit - len(kept)])
    return [_search_item(s, score) for score, s in kept]


def answered(s: Stored) -> Item:
    """The item as a read returns it: its value a copy, so a caller that changes it changes
    nothing the store holds (only a put does)."""
    item = s.item
    return Item(
        value=copy.deepcopy(item.value),
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _search_item(s: Stored, score: float | None) -> SearchItem:
    item = s.item
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=copy.deepcopy(item.value),
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=None if score is None or math.isnan(score) else float(score),
    )


# --- namespaces -----------------------------------------------------------------------------------


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A `list_namespaces` prefix or suffix condition, `"*"` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


def listed(
    namespaces: Iterable[tuple[str, ...]],
    conditions: Sequence[MatchCondition],
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """`list_namespaces`' answer: the matching namespaces cut to `max_depth`, distinct, sorted."""
    kept = {
        ns if max_depth is None else ns[:max_depth]
        for ns in namespaces
        if all(namespace_matches(c, ns) for c in conditions)
    }
    return sorted(kept)[offset : offset + limit]
