"""Sliding, turn-window and token-count strategies (docs/api.md "Strategies")."""

from __future__ import annotations

import pytest
from sessionledger.domain import format_event
from sessionledger.domain.compaction import (
    CompactionResult,
    SlidingWindowStrategy,
    TokenCountStrategy,
    TurnWindowStrategy,
)

from tests.unit.compaction_support import (
    answering,
    assistant,
    calling,
    chat,
    request,
    summary_pair,
    texts,
    user,
)


def tokens(events) -> int:
    return sum(len(format_event(e)) for e in events)


def assert_noop(result: CompactionResult, events) -> None:
    assert result.compacted == tuple(events)
    assert result.archived == ()
    assert result.tokens_saved == 0


# --- SlidingWindowStrategy ----------------------------------------------------------------------


def test_sliding_window_under_budget_is_a_noop_and_leaves_synthetics_in_place():
    events = [user("u1"), *summary_pair(), assistant("a1")]
    assert_noop(SlidingWindowStrategy(2, len).compact(request(events)), events)


def test_sliding_window_archives_the_oldest_and_snaps_forward_to_a_turn():
    events = chat(3)
    result = SlidingWindowStrategy(3, len).compact(request(events))
    assert texts(result.compacted) == ["u3", "a3"]
    assert texts(result.archived) == ["u1", "a1", "u2", "a2"]
    assert result.tokens_saved == 8 + 13 + 8 + 13
    assert result.events_removed == 4


def test_sliding_window_on_a_turn_boundary_keeps_exactly_max_events():
    result = SlidingWindowStrategy(4, len).compact(request(chat(3)))
    assert texts(result.compacted) == ["u2", "a2", "u3", "a3"]
    assert texts(result.archived) == ["u1", "a1"]


def test_sliding_window_puts_synthetic_events_first():
    pair = summary_pair()
    events = [user("u1"), assistant("a1"), *pair, user("u2"), assistant("a2")]
    result = SlidingWindowStrategy(2, len).compact(request(events))
    assert result.compacted == (*pair, events[4], events[5])
    assert texts(result.archived) == ["u1", "a1"]


def test_sliding_window_v070_archives_everything_when_no_turn_start_follows():
    events = [user("u1"), assistant("a1"), user("u2"), assistant("a2"), assistant("a3"), assistant("a4")]
    result = SlidingWindowStrategy(2, len).compact(request(events))
    assert result.compacted == ()
    assert result.archived == tuple(events)


def with_a_branch_in_turn_two() -> list:
    """Three root turns; a sub-agent's question and answer inside the second."""
    return [
        user("u1"),
        assistant("a1"),
        user("u2"),
        user("sub q", branch="orch.researcher"),
        assistant("sub a", branch="orch.researcher"),
        assistant("a2"),
        user("u3"),
        assistant("a3"),
    ]


def test_sliding_window_branch_events_take_no_slot():
    events = with_a_branch_in_turn_two()
    result = SlidingWindowStrategy(4, len).compact(request(events))
    assert texts(result.compacted) == ["u2", "sub q", "sub a", "a2", "u3", "a3"]
    assert texts(result.archived) == ["u1", "a1"]


def test_sliding_window_archives_branch_events_with_their_root_turn():
    events = with_a_branch_in_turn_two()
    result = SlidingWindowStrategy(3, len).compact(request(events))
    assert texts(result.compacted) == ["u3", "a3"]
    assert texts(result.archived) == ["u1", "a1", "u2", "sub q", "sub a", "a2"]


def test_sliding_window_keeps_tool_call_and_result_together():
    events = [user("u1"), calling("c1"), answering("c1"), assistant("a1"), user("u2"), assistant("a2")]
    result = SlidingWindowStrategy(3, len).compact(request(events))
    assert texts(result.compacted) == ["u2", "a2"]
    assert result.archived == tuple(events[:4])
    assert result.tokens_saved == 8 + 57 + 47 + 13


def test_sliding_window_defaults_and_validation():
    assert SlidingWindowStrategy().max_events == 20
    with pytest.raises(ValueError, match="max_events must be greater than 0"):
        SlidingWindowStrategy(0)
    with pytest.raises(ValueError, match="request must not be None"):
        SlidingWindowStrategy(1, len).compact(None)


# --- TurnWindowStrategy -------------------------------------------------------------------------


def test_turn_window_keeps_the_last_turns():
    events = chat(5)
    result = TurnWindowStrategy(3, len).compact(request(events))
    assert texts(result.compacted) == ["u3", "a3", "u4", "a4", "u5", "a5"]
    assert texts(result.archived) == ["u1", "a1", "u2", "a2"]
    assert result.tokens_saved == 2 * (8 + 13)


def test_turn_window_under_budget_is_a_noop():
    events = [*chat(2), *summary_pair()]
    assert_noop(TurnWindowStrategy(2, len).compact(request(events)), events)


def test_turn_window_always_keeps_the_preamble():
    events = [
        assistant("welcome"),
        user("sub q", branch="orch.helper"),
        *chat(3),
    ]
    result = TurnWindowStrategy(1, len).compact(request(events))
    assert texts(result.compacted) == ["welcome", "sub q", "u3", "a3"]
    assert texts(result.archived) == ["u1", "a1", "u2", "a2"]


def test_turn_window_puts_synthetics_first_and_ignores_branch_users():
    pair = summary_pair()
    events = [
        user("u1"),
        user("sub", branch="orch.a"),
        assistant("sub a", branch="orch.a"),
        assistant("a1"),
        *pair,
        user("u2"),
        assistant("a2"),
    ]
    result = TurnWindowStrategy(1, len).compact(request(events))
    assert result.compacted == (*pair, events[6], events[7])
    assert texts(result.archived) == ["u1", "sub", "sub a", "a1"]


def test_turn_window_defaults_and_validation():
    assert TurnWindowStrategy().max_turns == 10
    with pytest.raises(ValueError, match="max_turns must be greater than 0"):
        TurnWindowStrategy(-1)


# --- TokenCountStrategy -------------------------------------------------------------------------


def test_token_count_keeps_the_newest_run_that_fits():
    events = chat(2)  # 8, 13, 8, 13
    result = TokenCountStrategy(25, len).compact(request(events))
    assert texts(result.compacted) == ["u2", "a2"]
    assert texts(result.archived) == ["u1", "a1"]
    assert result.tokens_saved == 21


def test_token_count_snaps_forward_when_the_run_starts_mid_turn():
    events = chat(2)
    result = TokenCountStrategy(13, len).compact(request(events))  # only a2 fits: snap to the end
    assert result.compacted == ()
    assert result.archived == tuple(events)


def test_token_count_stops_at_the_first_event_that_does_not_fit():
    events = [user("u1"), assistant("a1"), user("u2"), assistant("x" * 100), user("u3"), assistant("a3")]
    result = TokenCountStrategy(60, len).compact(request(events))
    assert texts(result.compacted) == ["u3", "a3"]


def test_token_count_everything_fitting_is_a_noop():
    events = chat(2)
    assert_noop(TokenCountStrategy(1000, len).compact(request(events)), events)


def test_token_count_has_no_fits_shortcut_for_a_leading_non_turn_event():
    events = [assistant("welcome"), *chat(1)]
    result = TokenCountStrategy(1000, len).compact(request(events))
    assert texts(result.compacted) == ["u1", "a1"]
    assert texts(result.archived) == ["welcome"]


def test_token_count_deducts_synthetic_events_from_the_budget():
    pair = summary_pair("s")
    events = [*pair, *chat(2)]
    budget = tokens(pair) + 21
    result = TokenCountStrategy(budget, len).compact(request(events))
    assert result.compacted == (*pair, *events[4:])
    assert texts(result.archived) == ["u1", "a1"]


def test_token_count_newest_event_too_big_archives_all_but_synthetics():
    pair = summary_pair("s")
    events = [*chat(1), *pair, user("u2"), assistant("y" * 500)]
    result = TokenCountStrategy(100, len).compact(request(events))
    assert result.compacted == tuple(pair)
    assert texts(result.archived) == ["u1", "a1", "u2", "y" * 500]


def test_token_count_synthetics_over_budget_archive_everything_real():
    pair = summary_pair("s" * 200)
    events = [*pair, *chat(1)]
    result = TokenCountStrategy(50, len).compact(request(events))
    assert result.compacted == tuple(pair)
    assert texts(result.archived) == ["u1", "a1"]


def test_token_count_defaults_and_validation():
    assert TokenCountStrategy().max_tokens == 4000
    with pytest.raises(ValueError, match="max_tokens must be greater than 0"):
        TokenCountStrategy(0)


# --- tool calls across the cut ------------------------------------------------------------------


def test_a_result_arriving_after_the_next_question_is_not_cut_from_its_call():
    # an async tool answers after the user already asked again: the cut moves to the next safe turn
    events = [
        user("u1"),
        calling("c1"),
        user("u2"),
        answering("c1"),
        assistant("a2"),
        user("u3"),
        assistant("a3"),
    ]
    result = SlidingWindowStrategy(5, len).compact(request(events))
    assert texts(result.compacted) == ["u3", "a3"]
    assert texts(result.archived[:2]) == ["u1", None]


def test_a_tool_call_still_running_in_the_last_turn_is_never_archived():
    events = [user("u1"), assistant("a1"), user("u2"), assistant("a2"), calling("c9")]
    result = SlidingWindowStrategy(2, len).compact(request(events))  # v0.7.0 would archive everything
    assert result.compacted == tuple(events[2:])
    assert texts(result.archived) == ["u1", "a1"]


def test_a_dead_tool_call_followed_by_another_turn_does_not_block():
    events = [user("u1"), calling("lost"), user("u2"), assistant("a2")]
    result = TurnWindowStrategy(1, len).compact(request(events))
    assert texts(result.compacted) == ["u2", "a2"]


def test_a_running_call_in_the_only_turn_makes_token_count_a_noop():
    events = [user("u1"), calling("c1")]
    assert_noop(TokenCountStrategy(10, len).compact(request(events)), events)


@pytest.mark.parametrize("strategy", [SlidingWindowStrategy, TurnWindowStrategy, TokenCountStrategy])
def test_an_estimator_must_be_callable(strategy):
    with pytest.raises(ValueError, match="estimator must be callable"):
        strategy(5, "len")
