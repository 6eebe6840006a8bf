"""`CompactionRequest`: what triggers and strategies look at."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.sessions import Session
from sessionledger.domain.tokens import TokenCounter, fallback_counter
from sessionledger.domain.turns import format_event, turn_count
from sessionledger.domain.window import WindowStats

EventSource = Iterable[SessionEvent] | Callable[[], Iterable[SessionEvent]]


class CompactionRequest:
    """A session's active window, plus the ledger's running aggregates of it when known.

    `events` may be a zero-argument callable: it is called once, the first time something needs the
    events, so a trigger that can decide from `stats` never loads the history. `counter` is the
    token counter an `estimator=None` means: the service and the workers build every request with
    the deployment's (the settings' model); a request built without one uses tiktoken's for the
    default model (`domain.tokens.fallback_counter`). `token_counts` maps event ids to that
    counter's count of `format_event(event)` as the ledger stored it, so strategies never tokenize
    an event twice.
    """

    __slots__ = ("_events", "_load", "counter", "session", "stats", "token_counts")

    def __init__(
        self,
        session: Session,
        events: EventSource,
        stats: WindowStats | None = None,
        token_counts: Mapping[str, int] | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        if session is None:
            raise ValueError("session must not be None")
        if events is None:
            raise ValueError("events must not be None")
        self.session = session
        self.stats = stats
        self.token_counts: Mapping[str, int] = token_counts or {}
        self.counter = counter
        self._load = events if callable(events) else None
        self._events: tuple[SessionEvent, ...] | None = None if callable(events) else tuple(events)

    @classmethod
    def of(
        cls,
        session: Session,
        events: EventSource,
        stats: WindowStats | None = None,
        token_counts: Mapping[str, int] | None = None,
        counter: TokenCounter | None = None,
    ) -> CompactionRequest:
        return cls(session, events, stats, token_counts, counter)

    def tokens_of(self, estimator: TokenCounter | None) -> Callable[[SessionEvent], int]:
        """How to weigh one event: `estimator` on its formatted text, or, for `None`, the count the
        ledger already stored, else the request's counter (counting only events it has not)."""
        if estimator is not None:
            return lambda event: estimator(format_event(event))
        known = self.token_counts
        counter = self.counter

        def tokens(event: SessionEvent) -> int:
            nonlocal counter
            stored = known.get(event.id)
            if stored is not None:
                return stored
            if counter is None:
                counter = fallback_counter()
            return counter(format_event(event))

        return tokens

    @property
    def events(self) -> tuple[SessionEvent, ...]:
        if self._events is None:
            loaded = None if self._load is None else self._load()
            if loaded is None:
                raise ValueError("events must not be None")
            self._events = tuple(loaded)
        return self._events

    @property
    def event_count(self) -> int:
        """Every event in the window, synthetic and branch events included."""
        return self.stats.events if self.stats is not None else len(self.events)

    @property
    def turn_count(self) -> int:
        """Non-synthetic root-level USER events."""
        return self.stats.turns if self.stats is not None else turn_count(self.events)

    def __repr__(self) -> str:
        loaded = "not loaded" if self._events is None else f"{len(self._events)} events"
        return f"CompactionRequest(session={self.session.id!r}, {loaded}, stats={self.stats!r})"
