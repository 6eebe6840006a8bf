"""The ports: what the domain needs from the outside world, as small protocols.

Adapters in `infrastructure` implement them; unit tests implement them with fakes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from domain.compaction.result import CompactionResult
    from domain.events import SessionEvent
    from domain.filters import EventFilter
    from domain.ledger import LedgerRecord
    from domain.sessions import Session

TokenCounter = Callable[[str], int]
"""Counts the tokens of one string; `len` is a valid (crude) counter."""


@runtime_checkable
class Summarizer(Protocol):
    """Turns a prompt into a summary; `None` or blank means "no summary"."""

    def summarize(self, system_prompt: str, user_prompt: str) -> str | None: ...


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
    """What a compaction read saw: the CAS version, the window epoch and the ledger head."""

    version: int
    epoch: int
    head_position: int


class Ledger(Protocol):
    """The append-only session ledger plus its window projection (one per backend)."""

    # sessions
    def create_session(self, session: Session) -> None:
        """Store a new session; `ValueError` if the id exists or was deleted."""

    def get_session(self, session_id: str) -> Session | None: ...

    def list_sessions(self, user_id: str, app_name: str | None) -> list[Session]: ...

    def delete_session(self, session_id: str, reason: str) -> None: ...

    def expired_session_ids(self, now: datetime) -> list[str]: ...

    # events
    def append(self, events: Sequence[SessionEvent]) -> list[bool]:
        """Append events (any sessions) atomically; per event True if stored, False if a duplicate."""

    def events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]: ...

    def head(self, session_id: str) -> WindowHead | None: ...

    def window_stats(self, session_id: str) -> WindowStats | None: ...

    def fill_token_counts(self, session_id: str, counter: TokenCounter) -> int:
        """Count and store the tokens of window events not yet counted; returns how many."""

    # window changes (compare-and-swap on the version)
    def apply_compaction(
        self, session_id: str, read: WindowHead, result: CompactionResult, source: str
    ) -> int | None:
        """Write a compaction if the window epoch is still `read.epoch`; the new version or None."""

    def apply_rewind(self, session_id: str, before_invocation_id: str) -> int:
        """Hide the events from that invocation on; `LookupError` if the id is unknown."""

    # state
    def app_state(self, app_name: str) -> Mapping[str, Any]: ...

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]: ...

    # audit
    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        """Every ledger row of the session, by position, including erased ones."""

    def session_ids(self) -> Iterable[str]: ...

    def close(self) -> None: ...
