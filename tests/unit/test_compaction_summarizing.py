"""Recursive summarization and google-adk's two compactions (docs/api.md "Strategies")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from freezegun import freeze_time
from sessionledger.domain import MessageType, SessionEvent, format_event
from sessionledger.domain.compaction import (
    ADK_SYSTEM_PROMPT,
    DEFAULT_SHADOW_PROMPT,
    DEFAULT_SYSTEM_PROMPT,
    AdkSlidingWindowStrategy,
    AdkTokenThresholdStrategy,
    RecursiveSummarizationStrategy,
)

from tests.unit.compaction_support import (
    SESSION,
    RecordingSummarizer,
    answering,
    assistant,
    at,
    calling,
    chat,
    request,
    summary_pair,
    texts,
    user,
)

UPCOMING = "=== UPCOMING CONTEXT (do not summarize \u2014 for continuity only) ==="


def assert_summary_pair(events, summary: str, source: str) -> None:
    shadow, summary_event = events
    assert (shadow.type, shadow.message.text) == (MessageType.USER, DEFAULT_SHADOW_PROMPT)
    assert (summary_event.type, summary_event.message.text) == (MessageType.ASSISTANT, summary)
    for event in events:
        assert event.is_synthetic
        assert dict(event.metadata) == {SessionEvent.SYNTHETIC: True, SessionEvent.COMPACTION_SOURCE: source}
        assert (event.branch, event.archived, event.session_id) == (None, False, SESSION.id)
    assert shadow.timestamp == summary_event.timestamp
    assert shadow.id != summary_event.id


# --- RecursiveSummarizationStrategy -------------------------------------------------------------


def test_recursive_under_budget_makes_no_call():
    summarizer = RecordingSummarizer()
    events = [*summary_pair(), *chat(2)]
    result = RecursiveSummarizationStrategy(summarizer, 4, 2, estimator=len).compact(request(events))
    assert result.compacted == tuple(events)
    assert result.archived == ()
    assert summarizer.calls == []


@freeze_time("2026-03-01 12:00:00")
def test_recursive_summarizes_the_oldest_events_with_the_exact_prompt():
    summarizer = RecordingSummarizer("The user said u1; the assistant answered a1.")
    events = chat(3)
    result = RecursiveSummarizationStrategy(summarizer, 4, 2, estimator=len).compact(request(events))

    assert summarizer.calls == [
        (
            DEFAULT_SYSTEM_PROMPT,
            "=== CONVERSATION TO SUMMARIZE ===\n"
            "User: u1\n"
            "Assistant: a1\n"
            "\n" + UPCOMING + "\n"
            "User: u2\n"
            "Assistant: a2\n"
            "\n"
            "Please write the summary now:",
        )
    ]
    assert_summary_pair(
        result.compacted[:2], "The user said u1; the assistant answered a1.", "recursive-summarization"
    )
    assert result.compacted[0].timestamp == datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert result.compacted[2:] == tuple(events[2:])
    assert result.archived == tuple(events[:2])
    assert result.tokens_saved == 8 + 13


def test_recursive_folds_the_prior_summary_in_and_supersedes_it():
    summarizer = RecordingSummarizer("new summary")
    prior = summary_pair("Earlier: the user likes tea.")
    events = [*prior, *chat(3)]
    result = RecursiveSummarizationStrategy(summarizer, 4, 0, estimator=len).compact(request(events))

    assert summarizer.calls[0][1] == (
        "=== PRIOR SUMMARY ===\n"
        "Earlier: the user likes tea.\n"
        "\n"
        "=== CONVERSATION TO SUMMARIZE ===\n"
        "User: u1\n"
        "Assistant: a1\n"
        "\n"
        "Please write the summary now:"
    )
    assert not set(prior) & set(result.compacted)
    assert not set(prior) & set(result.archived)
    assert texts(result.compacted) == [DEFAULT_SHADOW_PROMPT, "new summary", "u2", "a2", "u3", "a3"]


def test_recursive_prior_shadow_prompts_only_open_the_prior_summary_section():
    summarizer = RecordingSummarizer()
    events = [user("old shadow", synthetic=True), *chat(2)]
    RecursiveSummarizationStrategy(summarizer, 2, 0, estimator=len).compact(request(events))
    assert summarizer.calls[0][1].startswith("=== PRIOR SUMMARY ===\n\n=== CONVERSATION TO SUMMARIZE ===\n")


def test_recursive_formats_tool_events_in_the_prompt():
    summarizer = RecordingSummarizer()
    events = [user("u1"), calling("c1"), answering("c1"), assistant("a1"), *chat(1, "x")]
    RecursiveSummarizationStrategy(summarizer, 2, 1, estimator=len).compact(request(events))
    assert summarizer.calls[0][1] == (
        "=== CONVERSATION TO SUMMARIZE ===\n"
        "User: u1\n"
        'Assistant [tool calls: get_weather({"location":"Paris"})]\n'
        'Tool [responses: get_weather -> {"temp":"22C"}]\n'
        "Assistant: a1\n"
        "\n" + UPCOMING + "\n"
        "User: xu1\n"
        "\n"
        "Please write the summary now:"
    )


@pytest.mark.parametrize("reply", [None, "", "   \n\t"])
def test_recursive_blank_summary_is_a_noop(reply):
    summarizer = RecordingSummarizer(reply)
    events = [*chat(3), *summary_pair()]
    result = RecursiveSummarizationStrategy(summarizer, 2, 1, estimator=len).compact(request(events))
    assert len(summarizer.calls) == 1
    assert result.compacted == tuple(events)
    assert result.archived == ()


def test_recursive_summarizer_errors_propagate():
    summarizer = RecordingSummarizer(TimeoutError("LLM down"))
    with pytest.raises(TimeoutError, match="LLM down"):
        RecursiveSummarizationStrategy(summarizer, 2, 1, estimator=len).compact(request(chat(3)))


def test_recursive_custom_prompts_are_used():
    summarizer = RecordingSummarizer("s")
    strategy = RecursiveSummarizationStrategy(
        summarizer, 2, 0, system_prompt="Be brief.", shadow_prompt="Recap please.", estimator=len
    )
    result = strategy.compact(request(chat(2)))
    assert summarizer.calls[0][0] == "Be brief."
    assert texts(result.compacted[:2]) == ["Recap please.", "s"]


def test_recursive_compacts_sub_agent_branches_with_their_turn():
    summarizer = RecordingSummarizer("s")
    events = [
        user("u1"),
        user("sub q", branch="orch.researcher"),
        assistant("sub a", branch="orch.researcher"),
        assistant("a1"),
        *chat(2, "x"),
    ]
    result = RecursiveSummarizationStrategy(summarizer, 4, 1, estimator=len).compact(request(events))
    assert texts(result.archived) == ["u1", "sub q", "sub a", "a1"]
    assert texts(result.compacted[2:]) == ["xu1", "xa1", "xu2", "xa2"]
    assert "User: sub q\nAssistant: sub a\n" in summarizer.calls[0][1]


def test_recursive_defaults():
    strategy = RecursiveSummarizationStrategy(RecordingSummarizer())
    assert (strategy.max_events_to_keep, strategy.overlap_size) == (10, 2)
    assert strategy.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert strategy.shadow_prompt == DEFAULT_SHADOW_PROMPT == "Summarize the conversation we had so far."
    for guideline in ("third-person", "prior summary", "pending", "preferences"):
        assert guideline in DEFAULT_SYSTEM_PROMPT


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"summarizer": None}, "summarizer must not be None"),
        ({"summarizer": object()}, "summarizer has no summarize"),
        ({"max_events_to_keep": 0}, "max_events_to_keep must be greater than 0"),
        ({"overlap_size": -1}, "overlap_size must be >= 0"),
        (
            {"max_events_to_keep": 3, "overlap_size": 3},
            r"overlap_size \(3\) must be less than max_events_to_keep \(3\)",
        ),
        ({"system_prompt": " "}, "system_prompt must not be empty"),
        ({"shadow_prompt": ""}, "shadow_prompt must not be empty"),
    ],
)
def test_recursive_validation(kwargs, message):
    args = {"summarizer": RecordingSummarizer(), **kwargs}
    with pytest.raises(ValueError, match=message):
        RecursiveSummarizationStrategy(**args)


def test_recursive_none_request_is_a_value_error():
    with pytest.raises(ValueError, match="request must not be None"):
        RecursiveSummarizationStrategy(RecordingSummarizer()).compact(None)


# --- AdkSlidingWindowStrategy -------------------------------------------------------------------


def invocation(n: int, **kw) -> list[SessionEvent]:
    return [user(f"u{n}", invocation=f"inv{n}", **kw), assistant(f"a{n}", invocation=f"inv{n}", **kw)]


def test_adk_sliding_waits_for_enough_new_invocations():
    summarizer = RecordingSummarizer()
    events = [*invocation(1), *invocation(2)]
    result = AdkSlidingWindowStrategy(summarizer, 3, 1, estimator=len).compact(request(events))
    assert result.compacted == tuple(events)
    assert summarizer.calls == []


def test_adk_sliding_summarizes_every_new_invocation():
    summarizer = RecordingSummarizer("s1-4")
    events = [e for n in range(1, 5) for e in invocation(n)]
    result = AdkSlidingWindowStrategy(summarizer, 2, 1, estimator=len).compact(request(events))
    assert summarizer.calls == [(ADK_SYSTEM_PROMPT, "\n".join(format_event(e) for e in events))]
    assert_summary_pair(result.compacted, "s1-4", "adk-sliding-window")
    assert result.compacted[0].timestamp == events[-1].timestamp
    assert result.archived == tuple(events)
    assert result.tokens_saved == sum(len(format_event(e)) for e in events)


def test_adk_sliding_counts_only_invocations_after_the_newest_summary():
    summarizer = RecordingSummarizer("s3-4")
    prior = summary_pair("s1-2", ts=at(-50))
    events = [*prior, *invocation(3)]
    strategy = AdkSlidingWindowStrategy(summarizer, 2, 0, estimator=len)
    assert strategy.compact(request(events)).compacted == tuple(events)
    events += invocation(4)
    result = strategy.compact(request(events))
    assert result.compacted[:2] == tuple(prior)  # earlier summaries stay, as in ADK's context
    assert_summary_pair(result.compacted[2:], "s3-4", "adk-sliding-window")
    assert texts(result.archived) == ["u3", "a3", "u4", "a4"]


def test_adk_sliding_overlap_reincludes_earlier_invocations_still_in_the_window():
    # ADK's docstring example: [inv1, inv2, C(1..2), inv3, inv4, inv5], interval 2, overlap 1 -> inv2..inv5
    inv2 = invocation(2, ts=at(-90))
    prior = summary_pair("s1-2", ts=at(-90))
    later = [*invocation(3), *invocation(4), *invocation(5)]
    summarizer = RecordingSummarizer("s2-5")
    result = AdkSlidingWindowStrategy(summarizer, 2, 1, estimator=len).compact(
        request([*prior, *inv2, *later])
    )
    assert texts(result.archived) == ["u2", "a2", "u3", "a3", "u4", "a4", "u5", "a5"]
    assert summarizer.calls[0][1].startswith("User: u2\nAssistant: a2\nUser: u3")
    assert result.compacted[:2] == tuple(prior)


def test_adk_sliding_events_without_invocation_are_their_own_group():
    summarizer = RecordingSummarizer()
    events = chat(2)
    assert AdkSlidingWindowStrategy(summarizer, 5, 0).compact(request(events)).archived == ()
    result = AdkSlidingWindowStrategy(summarizer, 4, 0, estimator=len).compact(request(events))
    assert result.archived == tuple(events)


def test_adk_sliding_never_summarizes_a_call_still_waiting_for_its_result():
    summarizer = RecordingSummarizer("s")
    first = [
        user("u1", invocation="i1"),
        calling("c1", invocation="i1"),
        answering("c1", invocation="i1"),
        assistant("a1", invocation="i1"),
    ]
    running = [user("u2", invocation="i2"), calling("c2", invocation="i2")]
    result = AdkSlidingWindowStrategy(summarizer, 2, 0, estimator=len).compact(request([*first, *running]))
    assert result.archived == tuple(first)
    assert result.compacted[2:] == tuple(running)


def test_adk_sliding_validation():
    with pytest.raises(ValueError, match="compaction_interval must be greater than 0"):
        AdkSlidingWindowStrategy(RecordingSummarizer(), 0, 0)
    with pytest.raises(ValueError, match="overlap_size must be >= 0"):
        AdkSlidingWindowStrategy(RecordingSummarizer(), 1, -1)
    with pytest.raises(ValueError, match="summarizer must not be None"):
        AdkSlidingWindowStrategy(None, 1, 0)


# --- AdkTokenThresholdStrategy ------------------------------------------------------------------


def test_adk_token_below_threshold_makes_no_call():
    summarizer = RecordingSummarizer()
    events = chat(3)  # 63 characters
    result = AdkTokenThresholdStrategy(summarizer, 64, 2, len).compact(request(events))
    assert result.compacted == tuple(events)
    assert summarizer.calls == []


def test_adk_token_keeps_the_retained_tail():
    summarizer = RecordingSummarizer("s")
    events = chat(3)
    result = AdkTokenThresholdStrategy(summarizer, 63, 2, len).compact(request(events))
    assert summarizer.calls == [(ADK_SYSTEM_PROMPT, "User: u1\nAssistant: a1\nUser: u2\nAssistant: a2")]
    assert_summary_pair(result.compacted[:2], "s", "adk-token-threshold")
    assert result.compacted[0].timestamp == events[3].timestamp
    assert result.compacted[2:] == tuple(events[4:])
    assert result.archived == tuple(events[:4])
    assert result.tokens_saved == 42


def test_adk_token_moves_the_split_earlier_to_a_turn_start():
    events = chat(3)
    result = AdkTokenThresholdStrategy(RecordingSummarizer(), 1, 3, len).compact(request(events))
    assert texts(result.archived) == ["u1", "a1"]


def test_adk_token_retention_zero_summarizes_everything():
    events = chat(2)
    result = AdkTokenThresholdStrategy(RecordingSummarizer("s"), 1, 0, len).compact(request(events))
    assert result.archived == tuple(events)
    assert texts(result.compacted) == [DEFAULT_SHADOW_PROMPT, "s"]


def test_adk_token_with_no_more_events_than_retained_is_a_noop():
    summarizer = RecordingSummarizer()
    events = [*summary_pair(), *chat(2)]
    assert AdkTokenThresholdStrategy(summarizer, 1, 4, len).compact(request(events)).archived == ()
    assert summarizer.calls == []


def test_adk_token_seeds_the_prompt_with_the_prior_summary_and_supersedes_it():
    summarizer = RecordingSummarizer("rolled")
    prior = summary_pair("s-old")
    events = [*prior, *chat(2)]
    result = AdkTokenThresholdStrategy(summarizer, 1, 2, len).compact(request(events))
    assert summarizer.calls[0][1] == "Assistant: s-old\nUser: u1\nAssistant: a1"
    assert texts(result.compacted) == [DEFAULT_SHADOW_PROMPT, "rolled", "u2", "a2"]
    assert not set(prior) & {*result.compacted, *result.archived}


def test_adk_token_never_leaves_a_result_whose_call_was_summarized():
    summarizer = RecordingSummarizer()
    events = [user("u1"), calling("c1"), user("u2"), answering("c1"), assistant("a2")]
    result = AdkTokenThresholdStrategy(summarizer, 1, 2, len).compact(request(events))
    assert result.compacted == tuple(events)
    assert summarizer.calls == []


def test_adk_token_blank_summary_is_a_noop():
    events = chat(3)
    result = AdkTokenThresholdStrategy(RecordingSummarizer("  "), 1, 2, len).compact(request(events))
    assert result.compacted == tuple(events)


def test_adk_token_validation():
    with pytest.raises(ValueError, match="token_threshold must be greater than 0"):
        AdkTokenThresholdStrategy(RecordingSummarizer(), 0, 0)
    with pytest.raises(ValueError, match="event_retention_size must be >= 0"):
        AdkTokenThresholdStrategy(RecordingSummarizer(), 1, -1)
