"""Triggers: Spring AI Session's turn and token rules, Sentinel's context window, ADK's interval."""

from __future__ import annotations

import re

import pytest
from sessionledger.domain import format_event
from sessionledger.domain.compaction import (
    AnyOf,
    CompactionRequest,
    ContextWindowTrigger,
    EventCountTrigger,
    SlidingWindowStrategy,
    TokenCountStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
    context_window_for,
)
from sessionledger.domain.compaction import request as request_module
from sessionledger.domain.tokens import fallback_counter
from sessionledger.domain.window import WindowStats

from tests.unit.compaction_support import (
    SESSION,
    answering,
    assistant,
    at,
    calling,
    chat,
    request,
    summary_pair,
    user,
)


def _never_loaded():
    raise AssertionError("the events were loaded")


def lazy(stats: WindowStats) -> CompactionRequest:
    """A request that fails the test if anything reads its events."""
    return CompactionRequest.of(SESSION, _never_loaded, stats)


@pytest.fixture
def no_tokenizing(monkeypatch):
    """Makes any use of the fallback counter (of requests built without one) fail the test."""

    def refuse():
        raise AssertionError("the fallback counter was used")

    monkeypatch.setattr(request_module, "fallback_counter", refuse)


# --- TurnCountTrigger ---------------------------------------------------------------------------


def test_turn_count_fires_only_above_max_turns():
    assert TurnCountTrigger(2).should_compact(request(chat(3)))
    assert not TurnCountTrigger(3).should_compact(request(chat(3)))


def test_turn_count_ignores_synthetic_and_branch_users():
    events = [*summary_pair(), user("q1"), user("sub", branch="orch.a"), assistant("a1")]
    assert not TurnCountTrigger(1).should_compact(request(events))


def test_turn_count_decides_from_stats():
    assert TurnCountTrigger(2).should_compact(lazy(WindowStats(turns=3)))
    assert not TurnCountTrigger(3).should_compact(lazy(WindowStats(turns=3)))


@pytest.mark.parametrize("value", [0, -1])
def test_turn_count_validates_max_turns(value):
    with pytest.raises(ValueError, match="max_turns must be greater than 0"):
        TurnCountTrigger(value)


# --- TokenCountTrigger --------------------------------------------------------------------------


def test_format_lengths_from_the_reference():
    events = [user("u1"), assistant("a1"), calling("c1"), answering("c1")]
    assert [len(format_event(e)) for e in events] == [8, 13, 57, 47]


def test_token_count_with_len_fires_at_threshold():
    events = [user("u1"), assistant("a1")]  # 8 + 13
    assert TokenCountTrigger(21, len).should_compact(request(events))
    assert not TokenCountTrigger(22, len).should_compact(request(events))


def test_token_count_counts_tool_calls_responses_and_synthetic_events():
    events = [*summary_pair("s"), calling("c1"), answering("c1")]
    total = sum(len(format_event(e)) for e in events)
    assert total == len("User: Summarize the conversation we had so far.") + len("Assistant: s") + 57 + 47
    assert TokenCountTrigger(total, len).should_compact(request(events))
    assert not TokenCountTrigger(total + 1, len).should_compact(request(events))


def test_a_custom_estimator_counts_the_events_even_with_stats():
    events = [user("u1")]
    stats = WindowStats(events=1, tokens=10_000, bytes=10_000)
    assert not TokenCountTrigger(9, len).should_compact(request(events, stats))
    assert TokenCountTrigger(8, len).should_compact(request(events, stats))


def test_default_counter_uses_complete_stats_without_reading_events(no_tokenizing):
    stats = WindowStats(events=3, bytes=900, tokens=300, uncounted=0)
    assert TokenCountTrigger(300).should_compact(lazy(stats))
    assert not TokenCountTrigger(301).should_compact(lazy(stats))


def test_known_tokens_alone_can_fire_while_some_are_uncounted(no_tokenizing):
    assert TokenCountTrigger(300).should_compact(lazy(WindowStats(bytes=2000, tokens=300, uncounted=4)))


def test_too_few_bytes_cannot_reach_the_threshold(no_tokenizing):
    assert not TokenCountTrigger(1000).should_compact(lazy(WindowStats(bytes=999, tokens=10, uncounted=4)))
    events = [user("u1"), assistant("a1")]  # 21 bytes
    assert not TokenCountTrigger(22).should_compact(request(events))


def test_default_counter_counts_formatted_events_with_tiktoken():
    events = [
        user("Tell me about the weather in Paris."),
        calling("c1"),
        answering("c1"),
        assistant("Sunny."),
    ]
    tokens = sum(fallback_counter()(format_event(e)) for e in events)
    assert 0 < tokens < sum(len(format_event(e)) for e in events)
    assert TokenCountTrigger(tokens).should_compact(request(events))
    assert not TokenCountTrigger(tokens + 1).should_compact(request(events))


def test_default_counter_counts_events_when_stats_are_incomplete():
    events = [user("Tell me about the weather in Paris."), assistant("Sunny.")]
    tokens = sum(fallback_counter()(format_event(e)) for e in events)
    stats = WindowStats(events=2, bytes=10_000, tokens=1, uncounted=1)
    assert TokenCountTrigger(tokens).should_compact(request(events, stats))
    assert not TokenCountTrigger(tokens + 1).should_compact(request(events, stats))


@pytest.mark.parametrize("value", [0, -5])
def test_token_count_validates_threshold(value):
    with pytest.raises(ValueError, match="threshold must be greater than 0"):
        TokenCountTrigger(value, len)


# --- ContextWindowTrigger -----------------------------------------------------------------------


def fixed(tokens: int):
    return lambda text: tokens


def test_context_window_fires_at_percentage_of_the_window():
    one = [user("x")]
    assert ContextWindowTrigger(1000, 60, fixed(600)).should_compact(request(one))
    assert not ContextWindowTrigger(1000, 60, fixed(599)).should_compact(request(one))


def test_context_window_boundary_is_floored():
    one = [user("x")]
    assert ContextWindowTrigger(999, 60).boundary == 599
    assert ContextWindowTrigger(999, 60, fixed(599)).should_compact(request(one))


def test_context_window_default_percentage_is_60():
    assert ContextWindowTrigger(128_000).boundary == 76_800


def test_zero_percentage_always_fires_without_reading(no_tokenizing):
    assert ContextWindowTrigger(1000, 0).should_compact(lazy(WindowStats()))
    assert ContextWindowTrigger(1000, 0, len).should_compact(request([]))


def test_context_window_uses_stats_with_the_default_counter(no_tokenizing):
    assert ContextWindowTrigger(1000, 50).should_compact(lazy(WindowStats(bytes=4000, tokens=500)))
    assert not ContextWindowTrigger(1000, 50).should_compact(lazy(WindowStats(bytes=4000, tokens=499)))


@pytest.mark.parametrize(
    ("window", "percentage", "message"),
    [
        (0, 60, "context_window must be greater than 0"),
        (-1, 60, "context_window must be greater than 0"),
        (1000, -1, "percentage must be between 0 and 100"),
        (1000, 101, "percentage must be between 0 and 100"),
    ],
)
def test_context_window_validation(window, percentage, message):
    with pytest.raises(ValueError, match=message):
        ContextWindowTrigger(window, percentage)


def test_hundred_percent_is_allowed():
    assert ContextWindowTrigger(10, 100, len).boundary == 10


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4.1-nano-2025-04-14", 1_047_576),
        ("gpt-4.5-preview", 128_000),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o3-mini", 200_000),
        ("o4-mini", 200_000),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-32k", 32_768),
        ("gpt-4-32k-0613", 32_768),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-3.5-turbo-0125", 16_385),
        ("GPT-4o", 128_000),
    ],
)
def test_context_window_table_longest_prefix_wins(model, window):
    assert context_window_for(model) == window
    assert ContextWindowTrigger.for_model(model).context_window == window


def test_for_model_passes_percentage_and_estimator():
    trigger = ContextWindowTrigger.for_model("gpt-4", percentage=50, estimator=len)
    assert (trigger.context_window, trigger.boundary, trigger.estimator) == (8192, 4096, len)


@pytest.mark.parametrize("model", ["claude-3-opus", "", "text-davinci-003"])
def test_unknown_model_is_a_value_error_naming_it(model):
    with pytest.raises(ValueError, match=f"unknown model {model!r}"):
        ContextWindowTrigger.for_model(model)


# --- EventCountTrigger --------------------------------------------------------------------------


def test_event_count_without_summary_counts_every_real_event():
    events = chat(2)
    assert EventCountTrigger(4).should_compact(request(events))
    assert not EventCountTrigger(5).should_compact(request(events))


def test_event_count_counts_only_events_newer_than_the_newest_summary():
    events = [
        user("old", ts=at(-100)),
        *summary_pair(ts=at(-50)),
        assistant("late but older", ts=at(-60)),
        user("new 1", ts=at(-10)),
        assistant("new 2", ts=at(-5)),
    ]
    assert EventCountTrigger(2).should_compact(request(events))
    assert not EventCountTrigger(3).should_compact(request(events))


def test_event_count_decides_from_stats_when_they_say_enough():
    assert not EventCountTrigger(4).should_compact(lazy(WindowStats(events=9, events_since_summary=3)))
    assert EventCountTrigger(3).should_compact(lazy(WindowStats(events=3, events_since_summary=3)))


def test_event_count_does_not_take_the_events_a_summary_kept_for_new():
    """After a compaction the window is the summary, then the older events it kept: the stats
    count those after the summary, the trigger reads the window and finds none new."""
    kept = [user("kept q", ts=at(-60)), assistant("kept a", ts=at(-55))]
    window = [*summary_pair(ts=at(-50)), *kept]
    stats = WindowStats(events=4, events_since_summary=2)
    assert not EventCountTrigger(2).should_compact(CompactionRequest.of(SESSION, window, stats))
    window.append(user("new", ts=at(-5)))
    stats = WindowStats(events=5, events_since_summary=3)
    assert not EventCountTrigger(2).should_compact(CompactionRequest.of(SESSION, window, stats))
    window.append(assistant("new answer", ts=at(-4)))
    stats = WindowStats(events=6, events_since_summary=4)
    assert EventCountTrigger(2).should_compact(CompactionRequest.of(SESSION, window, stats))


def test_event_count_validates_interval():
    with pytest.raises(ValueError, match="interval must be greater than 0"):
        EventCountTrigger(0)


# --- AnyOf and shared rules ---------------------------------------------------------------------


class Recording:
    def __init__(self, answer: bool, log: list[str], name: str) -> None:
        self.answer, self.log, self.name = answer, log, name

    def should_compact(self, request) -> bool:
        self.log.append(self.name)
        return self.answer


def test_any_of_asks_in_order_and_stops_at_the_first_yes():
    log: list[str] = []
    trigger = AnyOf(Recording(False, log, "a"), Recording(True, log, "b"), Recording(True, log, "c"))
    assert trigger.should_compact(request([]))
    assert log == ["a", "b"]


def test_any_of_is_false_when_none_fires():
    log: list[str] = []
    assert not AnyOf(Recording(False, log, "a"), Recording(False, log, "b")).should_compact(request([]))
    assert log == ["a", "b"]


def test_any_of_combines_real_triggers():
    trigger = AnyOf(TurnCountTrigger(5), TokenCountTrigger(21, len))
    assert trigger.should_compact(request([user("u1"), assistant("a1")]))


def test_any_of_needs_triggers():
    with pytest.raises(ValueError, match="triggers must not be empty"):
        AnyOf()
    with pytest.raises(ValueError, match="not a trigger"):
        AnyOf(TurnCountTrigger(1), object())


@pytest.mark.parametrize(
    "trigger",
    [
        TurnCountTrigger(1),
        TokenCountTrigger(1, len),
        ContextWindowTrigger(100, 50, len),
        EventCountTrigger(1),
        AnyOf(TurnCountTrigger(1)),
    ],
    ids=repr,
)
def test_a_none_request_is_a_value_error(trigger):
    with pytest.raises(ValueError, match="request must not be None"):
        trigger.should_compact(None)


def test_an_estimator_must_be_callable():
    with pytest.raises(ValueError, match="estimator must be callable"):
        TokenCountTrigger(10, "len")
    with pytest.raises(ValueError, match="estimator must be callable"):
        ContextWindowTrigger(1000, 60, 3)


# --- stored token counts --------------------------------------------------------------------------


def test_strategies_weigh_events_with_the_counts_the_ledger_stored(no_tokenizing):
    events = chat(6)
    stored = {event.id: 7 for event in events}
    counted = CompactionRequest.of(SESSION, events, None, stored)
    result = SlidingWindowStrategy(max_events=4).compact(counted)
    assert result.archived and result.tokens_saved == 7 * len(result.archived)
    assert TokenCountStrategy(max_tokens=7 * 4).compact(counted).compacted == tuple(events[-4:])
    assert TokenCountTrigger(7 * 12).should_compact(counted)
    assert not TokenCountTrigger(7 * 12 + 1).should_compact(counted)


def test_an_explicit_estimator_ignores_stored_counts():
    events = chat(2)
    counted = CompactionRequest.of(SESSION, events, None, {event.id: 1000 for event in events})
    assert not TokenCountTrigger(1000, estimator=len).should_compact(counted)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ContextWindowTrigger(True), "context_window must be an integer, got True"),
        (lambda: ContextWindowTrigger(float("nan")), "context_window must be an integer, got nan"),
        (lambda: ContextWindowTrigger(1000, percentage="60"), "percentage must be an integer, got '60'"),
        (lambda: ContextWindowTrigger(1000, percentage=None), "percentage must be an integer, got None"),
        (lambda: TurnCountTrigger(2.5), "max_turns must be an integer, got 2.5"),
        (lambda: EventCountTrigger(True), "interval must be an integer, got True"),
    ],
)
def test_a_count_that_is_no_integer_is_a_value_error(make, message):
    """A bool is an int to Python, and a NaN compares false with everything: neither is a count."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        make()
