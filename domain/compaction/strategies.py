"""How to compact: strategies turn a `CompactionRequest` into a `CompactionResult`.

Anything with `compact(request) -> CompactionResult` is a strategy. The first four follow Spring AI
Session v0.7.0, the last two google-adk 2.13.0's compactions (docs/api.md "Strategies"). All of
them cut only where `window.settle_cut` allows, put synthetic events first, never archive a
synthetic event, and return the request's events unchanged when there is nothing to do. The
summarizing ones write a synthetic pair: a shadow USER prompt and the summary as an ASSISTANT
message, sharing one timestamp, on the root branch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sessionledger.domain.compaction.checks import (
    non_negative,
    not_blank,
    optional_counter,
    positive,
    required,
)
from sessionledger.domain.compaction.ports import Summarizer
from sessionledger.domain.compaction.prompts import (
    ADK_SYSTEM_PROMPT,
    DEFAULT_SHADOW_PROMPT,
    DEFAULT_SYSTEM_PROMPT,
    history_prompt,
    recursive_prompt,
)
from sessionledger.domain.compaction.request import CompactionRequest
from sessionledger.domain.compaction.result import CompactionResult
from sessionledger.domain.compaction.window import (
    cut_keeping_roots,
    reaches,
    settle_cut,
    split_synthetic,
    weigh,
)
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import AssistantMessage, MessageType, UserMessage
from sessionledger.domain.tokens import TokenCounter
from sessionledger.domain.turns import starts_turn


def _archiving(
    events: Sequence[SessionEvent],
    synthetic: list[SessionEvent],
    real: list[SessionEvent],
    cut: int,
    tokens_of: Callable[[SessionEvent], int],
    start: int = 0,
) -> CompactionResult:
    """Archive `real[start:cut]`, keep the rest behind the synthetic events; a no-op if that is empty."""
    if cut <= start:
        return CompactionResult.noop(events)
    archived = real[start:cut]
    return CompactionResult(
        (*synthetic, *real[:start], *real[cut:]), tuple(archived), weigh(archived, tokens_of)
    )


class SlidingWindowStrategy:
    """Keeps the newest `max_events` root-level events, the cut moved forward to a turn start.

    Branch (sub-agent) events take no slot: they go with the root turn around them.
    """

    def __init__(self, max_events: int = 20, estimator: TokenCounter | None = None) -> None:
        self.max_events = positive(max_events, "max_events")
        self.estimator = optional_counter(estimator)

    def compact(self, request: CompactionRequest) -> CompactionResult:
        events = required(request, "request").events
        synthetic, real = split_synthetic(events)
        cut = cut_keeping_roots(real, self.max_events)
        if cut is None:
            return CompactionResult.noop(events)
        return _archiving(events, synthetic, real, cut, request.tokens_of(self.estimator))

    def __repr__(self) -> str:
        return f"SlidingWindowStrategy(max_events={self.max_events})"


class TurnWindowStrategy:
    """Keeps the newest `max_turns` turns and the preamble (events before the first turn)."""

    def __init__(self, max_turns: int = 10, estimator: TokenCounter | None = None) -> None:
        self.max_turns = positive(max_turns, "max_turns")
        self.estimator = optional_counter(estimator)

    def compact(self, request: CompactionRequest) -> CompactionResult:
        events = required(request, "request").events
        synthetic, real = split_synthetic(events)
        starts = [index for index, event in enumerate(real) if starts_turn(event)]
        if len(starts) <= self.max_turns:
            return CompactionResult.noop(events)
        preamble = starts[0]
        cut = settle_cut(real, starts[-self.max_turns], start=preamble)
        return _archiving(events, synthetic, real, cut, request.tokens_of(self.estimator), start=preamble)

    def __repr__(self) -> str:
        return f"TurnWindowStrategy(max_turns={self.max_turns})"


class TokenCountStrategy:
    """Keeps the longest newest run of events that fits `max_tokens` beside the synthetic events.

    The run is contiguous (it stops at the first event that does not fit) and then snapped forward
    to a turn start, so leading events of no turn are archived even under budget (as in Spring's).
    """

    def __init__(self, max_tokens: int = 4000, estimator: TokenCounter | None = None) -> None:
        self.max_tokens = positive(max_tokens, "max_tokens")
        self.estimator = optional_counter(estimator)

    def compact(self, request: CompactionRequest) -> CompactionResult:
        events = required(request, "request").events
        synthetic, real = split_synthetic(events)
        tokens_of = request.tokens_of(self.estimator)
        remaining = self.max_tokens - weigh(synthetic, tokens_of)
        raw_cut, used = len(real), 0
        for index in range(len(real) - 1, -1, -1):
            tokens = tokens_of(real[index])
            if used + tokens > remaining:
                break
            used += tokens
            raw_cut = index
        return _archiving(events, synthetic, real, settle_cut(real, raw_cut), tokens_of)

    def __repr__(self) -> str:
        return f"TokenCountStrategy(max_tokens={self.max_tokens})"


def _checked_summarizer(summarizer: Summarizer) -> Summarizer:
    if not callable(getattr(required(summarizer, "summarizer"), "summarize", None)):
        raise ValueError(f"summarizer has no summarize(system_prompt, user_prompt) method: {summarizer!r}")
    return summarizer


def _summary_pair(
    session_id: str, shadow_prompt: str, summary: str, timestamp: datetime, source: str
) -> list[SessionEvent]:
    metadata = {SessionEvent.SYNTHETIC: True, SessionEvent.COMPACTION_SOURCE: source}
    return [
        SessionEvent(
            session_id=session_id, timestamp=timestamp, message=UserMessage(shadow_prompt), metadata=metadata
        ),
        SessionEvent(
            session_id=session_id, timestamp=timestamp, message=AssistantMessage(summary), metadata=metadata
        ),
    ]


def _usable(summary: str | None) -> str | None:
    """The summary as the model wrote it, or `None` when there is none or it is only white space."""
    return summary if summary is not None and summary.strip() else None


class RecursiveSummarizationStrategy:
    """Summarizes all but the newest `max_events_to_keep` root-level events into a synthetic pair.

    The prior summary is folded into the prompt and superseded: prior synthetic events are in
    neither list of the result. The first `overlap_size` kept events are shown to the summarizer as
    upcoming context. No summarizer call while under budget; a blank summary is a no-op; a
    summarizer error propagates.
    """

    SOURCE = "recursive-summarization"

    def __init__(
        self,
        summarizer: Summarizer,
        max_events_to_keep: int = 10,
        overlap_size: int = 2,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        shadow_prompt: str = DEFAULT_SHADOW_PROMPT,
        estimator: TokenCounter | None = None,
    ) -> None:
        self.summarizer = _checked_summarizer(summarizer)
        self.max_events_to_keep = positive(max_events_to_keep, "max_events_to_keep")
        self.overlap_size = non_negative(overlap_size, "overlap_size")
        if overlap_size >= max_events_to_keep:
            raise ValueError(
                f"overlap_size ({overlap_size}) must be less than max_events_to_keep ({max_events_to_keep})"
            )
        self.system_prompt = not_blank(system_prompt, "system_prompt")
        self.shadow_prompt = not_blank(shadow_prompt, "shadow_prompt")
        self.estimator = optional_counter(estimator)

    def compact(self, request: CompactionRequest) -> CompactionResult:
        events = required(request, "request").events
        synthetic, real = split_synthetic(events)
        cut = cut_keeping_roots(real, self.max_events_to_keep)
        if not cut:  # under budget, or no safe cut before the kept events
            return CompactionResult.noop(events)
        to_archive, active = real[:cut], real[cut:]
        prompt = recursive_prompt(synthetic, to_archive, active[: self.overlap_size])
        summary = _usable(self.summarizer.summarize(self.system_prompt, prompt))
        if summary is None:
            return CompactionResult.noop(events)
        pair = _summary_pair(request.session.id, self.shadow_prompt, summary, datetime.now(UTC), self.SOURCE)
        return CompactionResult(
            (*pair, *active), tuple(to_archive), weigh(to_archive, request.tokens_of(self.estimator))
        )

    def __repr__(self) -> str:
        return (
            f"RecursiveSummarizationStrategy(max_events_to_keep={self.max_events_to_keep}, "
            f"overlap_size={self.overlap_size})"
        )


def _invocations(real: Sequence[SessionEvent]) -> list[list[int]]:
    """Indices of `real` grouped by invocation id, by first appearance; no id = a group of its own."""
    groups: dict[object, list[int]] = {}
    for index, event in enumerate(real):
        groups.setdefault(event.invocation_id or ("no invocation", index), []).append(index)
    return list(groups.values())


def _turn_start_at_or_before(real: Sequence[SessionEvent], index: int) -> int:
    return next((i for i in range(index, -1, -1) if starts_turn(real[i])), 0)


class AdkSlidingWindowStrategy:
    """google-adk's sliding-window compaction (`compaction_interval` / `overlap_size`).

    Once at least `compaction_interval` invocations are new (their newest event is later than the
    newest synthetic event), their events, and those of the `overlap_size` invocations before them
    still in the window, are summarized; the range ends at the longest self-contained prefix (no
    tool call cut from its response, a turn start). Earlier summaries stay in the window, as every
    summary stays in ADK's context. The pair is dated at the summarized range's newest event, as
    ADK places a summary at its range's end.
    """

    SOURCE = "adk-sliding-window"

    def __init__(
        self,
        summarizer: Summarizer,
        compaction_interval: int,
        overlap_size: int,
        *,
        system_prompt: str = ADK_SYSTEM_PROMPT,
        shadow_prompt: str = DEFAULT_SHADOW_PROMPT,
        estimator: TokenCounter | None = None,
    ) -> None:
        self.summarizer = _checked_summarizer(summarizer)
        self.compaction_interval = positive(compaction_interval, "compaction_interval")
        self.overlap_size = non_negative(overlap_size, "overlap_size")
        self.system_prompt = not_blank(system_prompt, "system_prompt")
        self.shadow_prompt = not_blank(shadow_prompt, "shadow_prompt")
        self.estimator = optional_counter(estimator)

    def compact(self, request: CompactionRequest) -> CompactionResult:
        events = required(request, "request").events
        synthetic, real = split_synthetic(events)
        summarized_until = max((event.timestamp for event in synthetic), default=None)
        groups = _invocations(real)
        fresh = [
            position
            for position, group in enumerate(groups)
            if summarized_until is None or max(real[i].timestamp for i in group) > summarized_until
        ]
        if len(fresh) < self.compaction_interval:
            return CompactionResult.noop(events)
        first = groups[max(0, fresh[0] - self.overlap_size)][0]
        start = _turn_start_at_or_before(real, first)
        end = settle_cut(real, groups[fresh[-1]][-1] + 1, start=start, grow=False)
        if end <= start:
            return CompactionResult.noop(events)
        window = real[start:end]
        summary = _usable(self.summarizer.summarize(self.system_prompt, history_prompt(window)))
        if summary is None:
            return CompactionResult.noop(events)
        dated = max(event.timestamp for event in window)
        pair = _summary_pair(request.session.id, self.shadow_prompt, summary, dated, self.SOURCE)
        return CompactionResult(
            (*synthetic, *pair, *real[:start], *real[end:]),
            tuple(window),
            weigh(window, request.tokens_of(self.estimator)),
        )

    def __repr__(self) -> str:
        return (
            f"AdkSlidingWindowStrategy(compaction_interval={self.compaction_interval}, "
            f"overlap_size={self.overlap_size})"
        )


class AdkTokenThresholdStrategy:
    """google-adk's token-threshold compaction (`token_threshold` / `event_retention_size`).

    When the window (synthetic events included) weighs at least `token_threshold` tokens, all but
    the newest `event_retention_size` events are summarized, the cut moved earlier to a
    self-contained turn start. The prior summary seeds the prompt and is superseded (ADK's rolling
    seed). The pair is dated at the newest summarized event.
    """

    SOURCE = "adk-token-threshold"

    def __init__(
        self,
        summarizer: Summarizer,
        token_threshold: int,
        event_retention_size: int,
        estimator: TokenCounter | None = None,
        *,
        system_prompt: str = ADK_SYSTEM_PROMPT,
        shadow_prompt: str = DEFAULT_SHADOW_PROMPT,
    ) -> None:
        self.summarizer = _checked_summarizer(summarizer)
        self.token_threshold = positive(token_threshold, "token_threshold")
        self.event_retention_size = non_negative(event_retention_size, "event_retention_size")
        self.estimator = optional_counter(estimator)
        self.system_prompt = not_blank(system_prompt, "system_prompt")
        self.shadow_prompt = not_blank(shadow_prompt, "shadow_prompt")

    def compact(self, request: CompactionRequest) -> CompactionResult:
        if not reaches(required(request, "request"), self.token_threshold, self.estimator):
            return CompactionResult.noop(request.events)
        events = request.events
        synthetic, real = split_synthetic(events)
        if len(real) <= self.event_retention_size:
            return CompactionResult.noop(events)
        end = settle_cut(real, len(real) - self.event_retention_size, grow=False)
        if end == 0:
            return CompactionResult.noop(events)
        window = real[:end]
        seed = [event for event in synthetic if event.type != MessageType.USER]
        summary = _usable(self.summarizer.summarize(self.system_prompt, history_prompt([*seed, *window])))
        if summary is None:
            return CompactionResult.noop(events)
        dated = max(event.timestamp for event in (*synthetic, *window))
        pair = _summary_pair(request.session.id, self.shadow_prompt, summary, dated, self.SOURCE)
        return CompactionResult(
            (*pair, *real[end:]), tuple(window), weigh(window, request.tokens_of(self.estimator))
        )

    def __repr__(self) -> str:
        return (
            f"AdkTokenThresholdStrategy(token_threshold={self.token_threshold}, "
            f"event_retention_size={self.event_retention_size})"
        )
