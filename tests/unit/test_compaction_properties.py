"""Properties every strategy keeps, over random conversations with tools, sub-agents and summaries.

Whatever a strategy decides: synthetic events come first and are never archived; nothing real is
lost or reordered; the window is only ever cut at a turn start; a tool call and its response are
on the same side of the cut; a call still running in the last turn is never archived.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessionledger.domain import format_event
from sessionledger.domain.compaction import (
    AdkSlidingWindowStrategy,
    AdkTokenThresholdStrategy,
    CompactionResult,
    RecursiveSummarizationStrategy,
    SlidingWindowStrategy,
    TokenCountStrategy,
    TurnWindowStrategy,
)
from sessionledger.domain.turns import starts_turn

from tests.unit.compaction_support import (
    RecordingSummarizer,
    answering,
    assistant,
    calling,
    request,
    summary_pair,
    user,
)

STEPS = ["text", "tool", "two tools", "async tool", "sub-agent", "sub-agent tool"]


@st.composite
def conversations(draw):
    ids = (f"call-{n}" for n in itertools.count())
    events = []
    if draw(st.booleans()):
        events += summary_pair(draw(st.sampled_from(["s", "a longer prior summary"])))
    for _ in range(draw(st.integers(0, 2))):
        events.append(draw(st.sampled_from([assistant("welcome"), user("sub hello", branch="orch.a")])))
    deferred: list[str] = []
    for turn in range(draw(st.integers(0, 6))):
        inv = draw(st.sampled_from([None, f"inv-{turn}"]))
        events.append(user(f"question {turn}", invocation=inv))
        if deferred and draw(st.booleans()):
            events.append(answering(*deferred, invocation=inv))
            deferred = []
        for step in draw(st.lists(st.sampled_from(STEPS), max_size=4)):
            if step == "text":
                events.append(assistant(f"answer {turn}", invocation=inv))
            elif step in ("tool", "two tools"):
                called = [next(ids) for _ in range(1 if step == "tool" else 2)]
                events += [calling(*called, invocation=inv), answering(*called, invocation=inv)]
            elif step == "async tool":
                called = next(ids)
                events.append(calling(called, invocation=inv))
                deferred.append(called)
            else:
                branch = "orch.researcher"
                events += [user("sub q", branch=branch), assistant("sub a", branch=branch)]
                if step == "sub-agent tool":
                    called = next(ids)
                    events += [calling(called, branch=branch), answering(called, branch=branch)]
    if draw(st.booleans()):
        events.append(calling(next(ids)))  # still running at the end
    return events


summarizer = RecordingSummarizer("summary")


@st.composite
def any_strategy(draw):
    keep = draw(st.integers(1, 8))
    return draw(
        st.sampled_from(
            [
                SlidingWindowStrategy(draw(st.integers(1, 8)), len),
                TurnWindowStrategy(draw(st.integers(1, 4)), len),
                TokenCountStrategy(draw(st.integers(1, 400)), len),
                RecursiveSummarizationStrategy(
                    summarizer, keep, draw(st.integers(0, keep - 1)), estimator=len
                ),
                AdkSlidingWindowStrategy(
                    summarizer, draw(st.integers(1, 4)), draw(st.integers(0, 2)), estimator=len
                ),
                AdkTokenThresholdStrategy(
                    summarizer, draw(st.integers(1, 400)), draw(st.integers(0, 6)), len
                ),
            ]
        )
    )


def check(strategy, events, result: CompactionResult) -> None:
    real = [e for e in events if not e.is_synthetic]
    archived = set(result.archived)
    if not archived:
        assert result.compacted == tuple(events)
        return

    assert not any(e.is_synthetic for e in result.archived)
    flags = [e.is_synthetic for e in result.compacted]
    assert flags == sorted(flags, reverse=True), "synthetic events come first"
    assert [e for e in result.compacted if not e.is_synthetic] == [e for e in real if e not in archived]
    assert list(result.archived) == [e for e in real if e in archived]
    assert result.tokens_saved == sum(len(format_event(e)) for e in result.archived)

    for before, after in itertools.pairwise(real):
        if (before in archived) != (after in archived):
            assert starts_turn(after), f"cut before {format_event(after)!r}, not a turn start"

    if not isinstance(strategy, TurnWindowStrategy | AdkSlidingWindowStrategy):
        assert list(result.archived) == real[: len(archived)], "archives the oldest events"

    calls = {c.id: e for e in real for c in e.message.tool_calls}
    answered = set()
    for event in real:
        for response in event.message.tool_responses:
            answered.add(response.id)
            assert (calls[response.id] in archived) == (event in archived), f"{response.id} split"
    last_turn = max((i for i, e in enumerate(real) if starts_turn(e)), default=-1)
    for index, event in enumerate(real):
        if index > last_turn and any(c.id not in answered for c in event.message.tool_calls):
            assert event not in archived, "a running tool call was archived"


@settings(max_examples=400, deadline=None)
@given(any_strategy(), conversations())
def test_every_strategy_keeps_the_window_whole_and_consistent(strategy, events):
    check(strategy, events, strategy.compact(request(events)))


@pytest.mark.parametrize("keep", [1, 3])
@settings(max_examples=60, deadline=None)
@given(events=conversations())
def test_recursive_new_summary_replaces_prior_ones(keep, events):
    result = RecursiveSummarizationStrategy(summarizer, keep, 0, estimator=len).compact(request(events))
    if result.archived:
        assert [e.is_synthetic for e in result.compacted[:2]] == [True, True]
        assert not any(e.is_synthetic for e in result.compacted[2:])
        assert not ({e for e in events if e.is_synthetic} & set(result.compacted))
