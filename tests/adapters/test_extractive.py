"""The offline extractive summarizer, on hand-made prompts and on real ShareGPT conversations."""

from __future__ import annotations

import json

import pytest
from sessionledger.domain import AssistantMessage, Session, SessionEvent, UserMessage
from sessionledger.domain.compaction import (
    DEFAULT_SYSTEM_PROMPT,
    CompactionRequest,
    RecursiveSummarizationStrategy,
)
from sessionledger.domain.compaction.ports import Summarizer
from sessionledger.domain.compaction.prompts import history_prompt, recursive_prompt
from sessionledger.infrastructure.sharegpt import Conversation, conversations
from sessionledger.infrastructure.summarizers.extractive import HEADER, ExtractiveSummarizer, split_prompt

SID = "s-1"


def events_of(conversation: Conversation) -> list[SessionEvent]:
    return [SessionEvent(session_id=SID, message=message) for message in conversation.messages]


def summarize(prompt: str, max_chars: int = 1500) -> str | None:
    return ExtractiveSummarizer(max_chars).summarize(DEFAULT_SYSTEM_PROMPT, prompt)


TRIP = [
    SessionEvent(session_id=SID, message=UserMessage("Hi there!")),
    SessionEvent(session_id=SID, message=AssistantMessage("Hello! How can I help?")),
    SessionEvent(
        session_id=SID,
        message=UserMessage(
            "I want to plan a trip to Lisbon in May. My budget for the Lisbon trip is 1200 EUR."
        ),
    ),
    SessionEvent(
        session_id=SID,
        message=AssistantMessage(
            "For a Lisbon trip in May, stay in Alfama; hotels in Alfama fit a 1200 EUR budget.\nOk."
        ),
    ),
    SessionEvent(session_id=SID, message=UserMessage("ok thanks")),
]


def test_is_a_summarizer_and_says_it_is_extractive_in_its_first_line():
    summary = summarize(recursive_prompt([], TRIP, []))
    assert isinstance(ExtractiveSummarizer(), Summarizer)
    assert summary.splitlines()[0] == f"{HEADER} the key sentences of 5 earlier messages."


def test_keeps_the_informative_sentences_with_their_speaker_and_drops_chit_chat():
    lines = summarize(recursive_prompt([], TRIP, []), max_chars=300).splitlines()[1:]
    assert lines[0].startswith("- User: I want to plan a trip to Lisbon in May.")
    assert any(line.startswith("- Assistant: For a Lisbon trip in May, stay in Alfama") for line in lines)
    assert not any("ok thanks" in line or "Hi there" in line for line in lines)


def test_upcoming_context_is_not_summarized():
    overlap = [
        SessionEvent(session_id=SID, message=UserMessage("Now tell me about Zanzibar beaches please."))
    ]
    prompt = recursive_prompt([], TRIP, overlap)
    assert "Zanzibar" in prompt
    assert "Zanzibar" not in summarize(prompt)


def test_prior_summary_is_folded_in():
    prior = [
        SessionEvent(session_id=SID, message=UserMessage("Summarize the conversation we had so far.")),
        SessionEvent(
            session_id=SID, message=AssistantMessage("The user is allergic to peanuts and travels alone.")
        ),
    ]
    summary = summarize(recursive_prompt(prior, TRIP, []))
    assert "- Earlier: The user is allergic to peanuts and travels alone." in summary.splitlines()
    assert "Summarize the conversation" not in summary


def test_a_prior_extractive_summary_keeps_its_speakers_instead_of_nesting():
    first = summarize(recursive_prompt([], TRIP, []))
    prior = [SessionEvent(session_id=SID, message=AssistantMessage(first))]
    later = [
        SessionEvent(session_id=SID, message=UserMessage("Also book a fado show in Alfama for Friday night."))
    ]
    second = summarize(recursive_prompt(prior, later, []))
    assert second.count(HEADER) == 1
    assert "- User: I want to plan a trip to Lisbon in May." in second
    assert "- User: Also book a fado show in Alfama for Friday night." in second


def test_a_structured_prior_summary_contributes_its_fields():
    structured = {
        "title": "Trip",
        "summary": "The user plans a Lisbon trip.",
        "key_points": [],
        "key_facts": ["Budget 1200 EUR for hotels."],
    }
    prior = [SessionEvent(session_id=SID, message=AssistantMessage(json.dumps(structured)))]
    summary = summarize(recursive_prompt(prior, TRIP[:1], []))
    assert "- Earlier: The user plans a Lisbon trip." in summary
    assert "- Earlier: Budget 1200 EUR for hotels." in summary


def test_a_prompt_without_sections_is_all_conversation():
    assert split_prompt(history_prompt(TRIP)) == ("", history_prompt(TRIP))
    assert "Lisbon" in summarize(history_prompt(TRIP))


def test_nothing_to_summarize_is_no_summary_and_chit_chat_only_is_said_so():
    assert summarize("") is None
    assert summarize(recursive_prompt([], [], [])) is None
    greetings = [
        SessionEvent(session_id=SID, message=UserMessage(text)) for text in ("Hi there!", "Hello :)")
    ]
    chit_chat = summarize(recursive_prompt([], greetings, []))
    assert chit_chat.splitlines() == [
        f"{HEADER} the key sentences of 2 earlier messages.",
        "- (no informative sentences)",
    ]


@pytest.mark.parametrize("max_chars", [200, 600, 2000])
def test_bounded_and_deterministic_on_real_conversations(max_chars):
    real = list(conversations(limit=20, min_messages=6))
    assert len(real) == 20
    for conversation in real:
        events = events_of(conversation)
        prior = [SessionEvent(session_id=SID, message=AssistantMessage(conversation.messages[0].text * 3))]
        prompt = recursive_prompt(prior, events[:-2], events[-2:])
        summary = summarize(prompt, max_chars)
        assert len(summary) <= max_chars
        assert summary.startswith(HEADER)
        assert summary == summarize(prompt, max_chars)


def test_drives_the_recursive_strategy_offline():
    session = Session(id=SID, user_id="u")
    events = [e for c in conversations(limit=3) for e in events_of(c)]
    strategy = RecursiveSummarizationStrategy(ExtractiveSummarizer(), max_events_to_keep=4, overlap_size=1)
    result = strategy.compact(CompactionRequest.of(session, events))
    shadow, summary = result.compacted[:2]
    assert shadow.is_synthetic and summary.is_synthetic
    assert summary.message.text.startswith(HEADER)
    assert len(summary.message.text) <= 1500
    assert len(result.archived) == len(events) - len(result.compacted) + 2


def test_max_chars_must_leave_room_for_a_summary():
    with pytest.raises(ValueError, match="at least 200"):
        ExtractiveSummarizer(max_chars=50)
