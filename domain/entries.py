"""Adapter entries: what a framework adapter keeps in a session's ledger beside its messages.

A LangGraph checkpoint, a pending write or a store item is no message, yet it must be on the
session's hash chain so that verify, replay, timelines, digests and proofs cover it. An `Entry`
is such a record: a `type` (the adapter's name for it), a `key` and a JSON `value`. Entries are
outside the message window: they never show in `get_events`, the window or its stats.

Entries are never changed or removed. A `Forget` record makes the entries before it that it
matches stop being *live* (the adapter forgets them; the ledger keeps them, and that it forgot).
An entry written again under its key does not replace the older one: both stay live until
forgotten, and a reader that wants the newest per key takes the first in newest-first order.

The rule below (`live_entries`) is the one every backend applies to the rows it reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

MAX_KEY_LENGTH = 1024
"""An entry's key (and type) is an identifier kept in a column, not content: a bound keeps it so."""


def _check_name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"an entry's {name} must be a non-empty string, not {value!r}")
    if len(value) > MAX_KEY_LENGTH or "\x00" in value:
        raise ValueError(f"an entry's {name} must be at most {MAX_KEY_LENGTH} characters, without NUL")
    return value


@dataclass(frozen=True, slots=True)
class Entry:
    """An adapter's keyed record: `type` and `key` say what it is (both stay readable after the
    session's deletion erases `value`, as an event's type does), `value` is a JSON object.

    `plain`: the adapter built `value` itself of plain JSON holding no float (str keys, strings
    without NUL, `int`s within 64 bits, `bool`, `None`, lists and dicts; no subclasses), so its
    append neither checks it again (`codec.ensure_json`) nor searches it for floats to write its
    canonical text: on a LangGraph put those cost about a tenth of the saver's own work. A value
    that is not as its adapter says is stored all the same, and may then not read back exactly.
    """

    type: str
    key: str
    value: Mapping[str, Any]
    plain: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        _check_name(self.type, "type")
        _check_name(self.key, "key")
        if not isinstance(self.value, Mapping):
            raise ValueError(f"an entry's value must be a mapping, not {type(self.value).__name__}")


@dataclass(frozen=True, slots=True)
class Forget:
    """Forget the live entries written before it of `type` (any type when `None`) whose key
    starts with `prefix` and, when `keys` is given, is one of them."""

    type: str | None = None
    prefix: str = ""
    keys: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.type is not None:
            _check_name(self.type, "type")
        if not isinstance(self.prefix, str) or "\x00" in self.prefix:
            raise ValueError(f"a forget's prefix must be a string without NUL, not {self.prefix!r}")
        if self.keys is not None:
            object.__setattr__(self, "keys", tuple(_check_name(key, "key") for key in self.keys))

    def matches(self, entry_type: str, key: str) -> bool:
        return (
            (self.type is None or self.type == entry_type)
            and key.startswith(self.prefix)
            and (self.keys is None or key in self.keys)
        )

    def to_payload(self) -> dict[str, Any]:
        keys = None if self.keys is None else list(self.keys)
        return {"type": self.type, "prefix": self.prefix, "keys": keys}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Forget:
        keys = payload.get("keys")
        return cls(payload.get("type"), payload.get("prefix", ""), None if keys is None else tuple(keys))


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """A live entry as read back: its place in the session's ledger and when it was recorded."""

    type: str
    key: str
    value: Mapping[str, Any]
    position: int
    recorded_at: datetime


def entry_payload(entry: Entry) -> dict[str, Any]:
    """An entry record's payload (what its content hash covers)."""
    return {"type": entry.type, "key": entry.key, "value": dict(entry.value)}


@dataclass(frozen=True, slots=True)
class EntryRow:
    """What a backend reads of an entry or forget record (newest first) to apply `live_entries`:
    `forget` is set for a forget record, `entry` for an entry record."""

    position: int
    recorded_at: datetime
    entry: Entry | None = None
    forget: Forget | None = None


def entry_row(position: int, recorded_at: datetime, kind: str, payload: Mapping[str, Any]) -> EntryRow:
    """The `EntryRow` of a readable `entry` or `forgotten` record's payload."""
    if kind == "forgotten":
        return EntryRow(position, recorded_at, forget=Forget.from_payload(payload))
    return EntryRow(position, recorded_at, entry=Entry(payload["type"], payload["key"], payload["value"]))


def entry_log_row(position: int, recorded_at: datetime, kind: str, payload: Mapping[str, Any]) -> EntryRow:
    """`entry_row`, and a session's erasure record as a forget of every entry (`Forget()`): for a
    reader that catches up on a session's entry log (`Ledger.entry_log`), a deletion forgets all."""
    if kind == "erasure":
        return EntryRow(position, recorded_at, forget=Forget())
    return entry_row(position, recorded_at, kind, payload)


def live_entries(
    rows: Iterable[EntryRow], types: Iterable[str], prefix: str, limit: int | None
) -> Iterator[StoredEntry]:
    """The live entries of `types` whose key starts with `prefix`, newest first, at most `limit`.

    `rows` are a session's entry and forget records newest first (they may hold other entries:
    only those of `types` and `prefix` are kept): a forget hides what it matches among the rows
    after it in this order, which are the records written before it.
    """
    wanted = frozenset(types)
    forgets: list[Forget] = []
    found = 0
    if limit is not None and limit <= 0:
        return
    for row in rows:
        if row.forget is not None:
            forgets.append(row.forget)
            continue
        entry = row.entry
        if entry is None or entry.type not in wanted or not entry.key.startswith(prefix):
            continue
        if any(forget.matches(entry.type, entry.key) for forget in forgets):
            continue
        yield StoredEntry(entry.type, entry.key, entry.value, row.position, row.recorded_at)
        found += 1
        if limit is not None and found >= limit:
            return
