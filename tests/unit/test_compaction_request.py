"""CompactionRequest and CompactionResult (docs/api.md "CompactionRequest and CompactionResult")."""

from __future__ import annotations

import pytest
from sessionledger.domain.compaction import CompactionRequest, CompactionResult
from sessionledger.domain.window import WindowStats

from tests.unit.compaction_support import SESSION, assistant, chat, request, summary_pair, user


def _never_loaded():
    raise AssertionError("the events were loaded")


@pytest.mark.parametrize(
    ("events", "turns"),
    [
        ([], 0),
        (chat(3), 3),
        ([*summary_pair(), user("q1"), assistant("a1")], 1),
        ([assistant("a"), assistant("b")], 0),
        (
            [
                user("q1"),
                assistant("a1"),
                user("sub q", branch="orch.researcher"),
                assistant("sub a", branch="orch.researcher"),
                user("q2"),
                assistant("a2"),
            ],
            2,
        ),
    ],
    ids=["empty", "three-turns", "synthetic-excluded", "no-user", "branch-users-excluded"],
)
def test_turn_count_counts_real_root_user_events(events, turns):
    assert request(events).turn_count == turns


def test_event_count_includes_synthetic_and_branch_events():
    events = [*summary_pair(), user("q"), assistant("sub", branch="orch.x")]
    assert request(events).event_count == 4


def test_events_are_kept_in_order_as_a_tuple():
    events = chat(2)
    assert request(events).events == tuple(events)
    assert request(iter(events)).events == tuple(events)


def test_a_loader_is_called_once_and_only_when_the_events_are_needed():
    events = chat(2)
    calls = []

    def load():
        calls.append(1)
        return events

    req = CompactionRequest.of(SESSION, load)
    assert calls == []
    assert req.turn_count == 2
    assert req.events == tuple(events)
    assert req.event_count == 4
    assert calls == [1]


def test_counts_come_from_stats_without_loading_events():
    req = CompactionRequest.of(SESSION, _never_loaded, WindowStats(events=7, turns=3))
    assert (req.event_count, req.turn_count) == (7, 3)
    assert req.stats == WindowStats(events=7, turns=3)


@pytest.mark.parametrize(
    ("session", "events", "message"),
    [(None, [], "session must not be None"), (SESSION, None, "events must not be None")],
)
def test_none_session_or_events_is_a_value_error(session, events, message):
    with pytest.raises(ValueError, match=message):
        CompactionRequest.of(session, events)


def test_a_loader_returning_none_is_a_value_error():
    with pytest.raises(ValueError, match="events must not be None"):
        _ = CompactionRequest.of(SESSION, lambda: None).events


def test_result_holds_tuples_and_counts_removed_events():
    kept, gone = chat(1), chat(2)
    result = CompactionResult(kept, gone, 42)
    assert result.compacted == tuple(kept)
    assert result.archived == tuple(gone)
    assert result.tokens_saved == 42
    assert result.events_removed == 4


def test_noop_result_keeps_the_events_unchanged():
    events = [user("q"), *summary_pair(), assistant("a")]
    result = CompactionResult.noop(events)
    assert result.compacted == tuple(events)
    assert (result.archived, result.tokens_saved, result.events_removed) == ((), 0, 0)


@pytest.mark.parametrize("field", ["compacted", "archived"])
def test_result_rejects_none_lists(field):
    args = {"compacted": [], "archived": [], field: None}
    with pytest.raises(ValueError, match=f"{field} must not be None"):
        CompactionResult(args["compacted"], args["archived"], 0)
