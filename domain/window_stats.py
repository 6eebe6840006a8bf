"""Window stats (`window.WindowStats`): how a window's events make them, and how appends move them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sessionledger.domain.turns import format_message_bytes, starts_turn
from sessionledger.domain.window import WindowStats

if TYPE_CHECKING:
    from sessionledger.domain.events import SessionEvent


def event_bytes(event: SessionEvent) -> int:
    """The byte size a window stat counts: utf-8 bytes of the one-line rendering (>= its tokens)."""
    return format_message_bytes(event.message)


EventMeasure = tuple[bool, int, int | None, bool]
"""What a window stat counts of one event: whether it starts a turn, its bytes, its token count
(`None`: not counted yet) and whether it is synthetic (a summary)."""


def event_measure(event: SessionEvent, token_count: int | None) -> EventMeasure:
    return starts_turn(event), event_bytes(event), token_count, event.is_synthetic


def window_stats(window: Iterable[tuple[SessionEvent, int | None]]) -> WindowStats:
    """The stats of a window given as `(event, token_count or None)` in window order."""
    return stats_of_measures(event_measure(event, token_count) for event, token_count in window)


def stats_of_measures(measures: Iterable[EventMeasure]) -> WindowStats:
    """The stats of a window given as its events' measures in window order (`verify --jobs`
    measures events where it reads them and ships only the measures)."""
    events = turns = size = tokens = uncounted = since_summary = 0
    for turn, event_size, token_count, synthetic in measures:
        events += 1
        turns += turn
        size += event_size
        if token_count is None:
            uncounted += 1
        else:
            tokens += token_count
        since_summary = 0 if synthetic else since_summary + 1
    return WindowStats(events, turns, size, tokens, uncounted, since_summary)


def stats_after_appends(stats: WindowStats, events: Iterable[SessionEvent]) -> WindowStats:
    """The stats once `events` (not yet counted) join the end of the window, in order: O(1) per
    event, with one `WindowStats` built for the lot."""
    appended, turns, size, since_summary = 0, stats.turns, stats.bytes, stats.events_since_summary
    for event in events:
        appended += 1
        turns += starts_turn(event)
        size += event_bytes(event)
        since_summary = 0 if event.is_synthetic else since_summary + 1
    return WindowStats(
        events=stats.events + appended,
        turns=turns,
        bytes=size,
        tokens=stats.tokens,
        uncounted=stats.uncounted + appended,
        events_since_summary=since_summary,
    )
