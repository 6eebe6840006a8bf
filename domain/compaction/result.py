"""`CompactionResult`: the new active window and the events a compaction archives."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sessionledger.domain.events import SessionEvent


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """`compacted` is the new active window, in order; `archived` leaves it but stays in the ledger.

    Active events in neither tuple (a superseded summary) are archived too by whoever applies it.
    """

    compacted: tuple[SessionEvent, ...]
    archived: tuple[SessionEvent, ...]
    tokens_saved: int = 0

    def __post_init__(self) -> None:
        if self.compacted is None:
            raise ValueError("compacted must not be None")
        if self.archived is None:
            raise ValueError("archived must not be None")
        object.__setattr__(self, "compacted", tuple(self.compacted))
        object.__setattr__(self, "archived", tuple(self.archived))

    @property
    def events_removed(self) -> int:
        return len(self.archived)

    @classmethod
    def noop(cls, events: Iterable[SessionEvent]) -> CompactionResult:
        """Nothing to do: the window stays exactly as given, order included."""
        return cls(tuple(events), (), 0)
