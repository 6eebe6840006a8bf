"""When to compact: triggers decide from a `CompactionRequest`, reading as little as they can.

Anything with `should_compact(request) -> bool` is a trigger; these are the built-in ones.
"""

from __future__ import annotations

from sessionledger.domain.compaction.checks import integer, optional_counter, positive, required
from sessionledger.domain.compaction.models import context_window_for
from sessionledger.domain.compaction.ports import Trigger
from sessionledger.domain.compaction.request import CompactionRequest
from sessionledger.domain.compaction.window import reaches
from sessionledger.domain.tokens import TokenCounter


class TurnCountTrigger:
    """Fires when the window holds more than `max_turns` turns."""

    def __init__(self, max_turns: int) -> None:
        self.max_turns = positive(max_turns, "max_turns")

    def should_compact(self, request: CompactionRequest) -> bool:
        return required(request, "request").turn_count > self.max_turns

    def __repr__(self) -> str:
        return f"TurnCountTrigger(max_turns={self.max_turns})"


class TokenCountTrigger:
    """Fires when the window's `format_event` tokens reach `threshold` (`>=`).

    Synthetic events count. `estimator=None` is the request's counter (tiktoken's: the service and
    the workers hand theirs, for the configured model), restoring the default Spring AI Session
    documents but lost in v0.2.0.
    """

    def __init__(self, threshold: int, estimator: TokenCounter | None = None) -> None:
        self.threshold = positive(threshold, "threshold")
        self.estimator = optional_counter(estimator)

    def should_compact(self, request: CompactionRequest) -> bool:
        return reaches(required(request, "request"), self.threshold, self.estimator)

    def __repr__(self) -> str:
        return f"TokenCountTrigger(threshold={self.threshold}, estimator={self.estimator!r})"


class ContextWindowTrigger:
    """Sentinel's rule: fires when the window's tokens reach `percentage`% of the model's context.

    The boundary is `context_window * percentage // 100`; a percentage of 0 always fires.
    """

    def __init__(
        self, context_window: int, percentage: int = 60, estimator: TokenCounter | None = None
    ) -> None:
        self.context_window = positive(context_window, "context_window")
        if not 0 <= integer(percentage, "percentage") <= 100:
            raise ValueError(f"percentage must be between 0 and 100, got {percentage}")
        self.percentage = percentage
        self.estimator = optional_counter(estimator)

    @classmethod
    def for_model(
        cls, model: str, percentage: int = 60, estimator: TokenCounter | None = None
    ) -> ContextWindowTrigger:
        """The trigger for a known model's context window (`ValueError` for an unknown model)."""
        return cls(context_window_for(model), percentage, estimator)

    @property
    def boundary(self) -> int:
        return self.context_window * self.percentage // 100

    def should_compact(self, request: CompactionRequest) -> bool:
        return reaches(required(request, "request"), self.boundary, self.estimator)

    def __repr__(self) -> str:
        return (
            f"ContextWindowTrigger(context_window={self.context_window}, "
            f"percentage={self.percentage}, estimator={self.estimator!r})"
        )


class EventCountTrigger:
    """google-adk's `compaction_interval`: fires once `interval` new events arrived since the summary.

    New means non-synthetic with a timestamp later than the newest synthetic event of the window
    (every non-synthetic event when there is none). `stats.events_since_summary` counts the events
    after the window's last summary, and a summary goes before the older events it keeps: so it
    decides alone when it is below `interval` or when the window holds no summary, and otherwise
    the window is read (right after a compaction, its kept events are not new).
    """

    def __init__(self, interval: int) -> None:
        self.interval = positive(interval, "interval")

    def should_compact(self, request: CompactionRequest) -> bool:
        required(request, "request")
        stats = request.stats
        if stats is not None and stats.events_since_summary < self.interval:
            return False
        if stats is not None and stats.events_since_summary == stats.events:
            return True
        events = request.events
        summarized = max((event.timestamp for event in events if event.is_synthetic), default=None)
        fresh = sum(
            1
            for event in events
            if not event.is_synthetic and (summarized is None or event.timestamp > summarized)
        )
        return fresh >= self.interval

    def __repr__(self) -> str:
        return f"EventCountTrigger(interval={self.interval})"


class AnyOf:
    """Fires when any of its triggers does, asking them in order and stopping at the first yes."""

    def __init__(self, *triggers: Trigger) -> None:
        if not triggers:
            raise ValueError("triggers must not be empty")
        for trigger in triggers:
            if not callable(getattr(trigger, "should_compact", None)):
                raise ValueError(f"not a trigger (no should_compact method): {trigger!r}")
        self.triggers = triggers

    def should_compact(self, request: CompactionRequest) -> bool:
        required(request, "request")
        return any(trigger.should_compact(request) for trigger in self.triggers)

    def __repr__(self) -> str:
        return f"AnyOf({', '.join(map(repr, self.triggers))})"
