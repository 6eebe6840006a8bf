"""Where a window may be cut, and what it weighs: the rules every strategy and trigger shares.

A cut index `c` over `real` (the non-synthetic events, in window order) archives `real[start:c]`.
A cut is allowed only at a turn start or at the end, so a question never loses its answer, and
only where every tool call is on the same side as its response. A call with no response yet, in
the last turn, is still running: its response will arrive after the end, so it is never archived.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from sessionledger.domain.compaction.request import CompactionRequest
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.tokens import TokenCounter
from sessionledger.domain.turns import starts_turn
from sessionledger.domain.window_stats import event_bytes


def split_synthetic(events: Iterable[SessionEvent]) -> tuple[list[SessionEvent], list[SessionEvent]]:
    """(synthetic, real), each in its original order."""
    synthetic: list[SessionEvent] = []
    real: list[SessionEvent] = []
    for event in events:
        (synthetic if event.is_synthetic else real).append(event)
    return synthetic, real


def tool_links(real: Sequence[SessionEvent]) -> list[tuple[int, int]]:
    """(call index, response index) pairs, matched left to right by tool-call id as ADK does.

    A call that no response answers links to `len(real)` when it is in the last turn (still
    running); an unanswered call followed by another turn is dead and links to nothing.
    """
    links: list[tuple[int, int]] = []
    open_calls: dict[str, int] = {}
    for index, event in enumerate(real):
        message = event.message
        for response in message.tool_responses:
            if response.id in open_calls:
                links.append((open_calls.pop(response.id), index))
        for call in message.tool_calls:
            open_calls[call.id] = index
    if open_calls:  # the last turn start is only needed for calls still open
        last_turn = next((i for i in range(len(real) - 1, -1, -1) if starts_turn(real[i])), -1)
        links.extend((index, len(real)) for index in open_calls.values() if index > last_turn)
    return links


def cut_keeping_roots(real: Sequence[SessionEvent], keep: int) -> int | None:
    """Where to cut so that at most `keep` root-level events stay (moved to a safe turn start);
    `None` when there are no more than `keep` of them. Branch events take no slot.

    Found from the end: the cut goes right after the `keep + 1`-th root-level event from the end.
    """
    seen = 0
    for index in range(len(real) - 1, -1, -1):
        if real[index].is_root:
            seen += 1
            if seen > keep:
                return settle_cut(real, index + 1)
    return None


def settle_cut(real: Sequence[SessionEvent], cut: int, *, start: int = 0, grow: bool = True) -> int:
    """The allowed cut nearest to `cut`; `start` (nothing archived) when there is none.

    Growing is Spring AI Session's forward snap: later turn starts first, then earlier ones. Not
    growing is ADK's self-contained prefix: only `cut` or earlier.
    """
    ends = [index for index in range(start, len(real)) if starts_turn(real[index])] + [len(real)]
    links = tool_links(real)

    def keeps_pairs(end: int) -> bool:
        return all((start <= call < end) == (start <= response < end) for call, response in links)

    earlier = [end for end in reversed(ends) if start < end < cut]
    if grow:
        candidates = [end for end in ends if end >= cut] + earlier
    else:
        candidates = ([cut] if cut in ends else []) + earlier
    return next((end for end in candidates if keeps_pairs(end)), start)


def weigh(events: Iterable[SessionEvent], tokens_of: Callable[[SessionEvent], int]) -> int:
    """Tokens of the events, each weighed by `tokens_of` (see `CompactionRequest.tokens_of`)."""
    return sum(tokens_of(event) for event in events)


def reaches(request: CompactionRequest, threshold: int, estimator: TokenCounter | None) -> bool:
    """Whether the window (synthetic events included) weighs at least `threshold` tokens.

    Counts as little as it can: the request counter's weight comes from `request.stats` when every
    event's count is known, and a window with fewer UTF-8 bytes than `threshold` cannot reach it
    (a tiktoken token is at least one byte). Counting stops once the threshold is reached.
    """
    if threshold <= 0:
        return True
    stats = request.stats
    if estimator is None and stats is not None:
        if stats.tokens >= threshold:
            return True
        if stats.uncounted == 0 or stats.bytes < threshold:
            return False
    events = request.events
    if estimator is None and stats is None and sum(map(event_bytes, events)) < threshold:
        return False
    tokens_of = request.tokens_of(estimator)
    total = 0
    for event in events:
        total += tokens_of(event)
        if total >= threshold:
            return True
    return False
