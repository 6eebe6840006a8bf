"""A session's active window: the rule that shapes it, and the window as a read returns it.

The window rule (docs/architecture.md "The ledger"): the window is an ordered *prefix* of
positions written by the last compaction or rewind, followed by every event row after the
*base* position that is neither in the prefix nor hidden by a rewind. Archived events are the
event rows in neither the window nor the hidden set. Appends therefore never touch the prefix.
The active window is a projection of the records: `replay.replay` rebuilds it from the records
alone, and the SQL and in-memory windows must equal it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionledger.domain.events import SessionEvent


@dataclass(slots=True)
class WindowShape:
    """The window as positions: the ordered prefix, the base position and the hidden set."""

    prefix: list[int] = field(default_factory=list)
    base: int = 0
    hidden: set[int] = field(default_factory=set)

    def split(self, event_positions: Iterable[int]) -> tuple[list[int], list[int]]:
        """`(archived, window)` positions for the session's event rows (given by position)."""
        in_prefix = set(self.prefix)
        archived: list[int] = []
        tail: list[int] = []
        for position in event_positions:
            if position in self.hidden or position in in_prefix:
                continue
            (tail if position > self.base else archived).append(position)
        return archived, [*self.prefix, *tail]

    def compact(self, record: Mapping[str, Any]) -> None:
        self.prefix = list(record["window"])
        self.base = record["read_head"]

    def rewind(self, record: Mapping[str, Any], position: int) -> None:
        self.prefix = list(record["window"])
        self.base = position
        self.hidden.update(record["hidden"])


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Running aggregates of a session's active window, kept by the ledger on every write.

    They let triggers decide in O(1) instead of re-reading and re-tokenizing the history.
    `tokens` counts only events whose count is known; `uncounted` says how many are not.
    """

    events: int = 0
    turns: int = 0
    bytes: int = 0
    tokens: int = 0
    uncounted: int = 0
    events_since_summary: int = 0


@dataclass(frozen=True, slots=True)
class WindowHead:
    """What a compaction read saw: the CAS version, the window epoch and the last position it read."""

    version: int
    epoch: int
    head_position: int


@dataclass(frozen=True, slots=True)
class Window:
    """A session's active window read in one consistent snapshot, with each event's ledger position.

    `head.head_position` is the highest position read: a compaction written from this window
    leaves every later event after the compacted window. `stats` are the running window stats
    read in the same snapshot; `token_counts` the events' stored counts (None = not yet counted).
    """

    head: WindowHead
    events: tuple[SessionEvent, ...]
    positions: tuple[int, ...]
    stats: WindowStats = WindowStats()
    token_counts: tuple[int | None, ...] = ()
