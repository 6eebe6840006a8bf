"""`SessionService.compact` with the real `openai` client against the local fake server, on every
backend: the summary is written back (plain and structured, then injected as facts); a failing, slow,
blank or refusing summarizer leaves the session exactly as it was and says why."""

from __future__ import annotations

import json

import pytest
from sessionledger.domain import AssistantMessage, EventFilter, UserMessage
from sessionledger.domain.compaction import RecursiveSummarizationStrategy, TurnCountTrigger
from sessionledger.domain.prompting import build_system_prompt, window_as_openai
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.summarizers import OpenAISummarizer, StructuredSummarizer, SummarizerError

from tests.fakes.fake_openai import Reply

SUMMARY = {
    "title": "Choosing a laptop",
    "keywords": ["laptop"],
    "summary": "The user compared two laptops and picked the lighter one.",
    "key_points": ["Weight matters most"],
    "key_facts": ["The budget is 1500 EUR"],
    "sentiment": "neutral",
    "confidence": 7,
}


@pytest.fixture
def service(database_url):
    with open_service(database_url) as service:
        yield service


def conversation(service, turns: int = 6) -> str:
    session = service.create_session("alice")
    for turn in range(turns):
        service.append_message(session.id, UserMessage(f"question {turn} about laptops"))
        service.append_message(session.id, AssistantMessage(f"answer {turn}"))
    return session.id


def strategy(summarizer) -> RecursiveSummarizationStrategy:
    return RecursiveSummarizationStrategy(summarizer, max_events_to_keep=4, overlap_size=1)


def snapshot(service, session_id: str):
    return (
        service.event_version(session_id),
        [e.id for e in service.get_events(session_id)],
        [(e.id, e.archived) for e in service.get_events(session_id, EventFilter.active())],
    )


def test_an_llm_summary_replaces_the_archived_turns_and_is_injected_as_facts(service, fake_openai):
    session_id = conversation(service)
    fake_openai.enqueue(Reply.json(SUMMARY))
    summarizer = StructuredSummarizer("gpt-4o-mini", base_url=fake_openai.base_url, api_key="k")
    version = service.event_version(session_id)

    result = service.compact(session_id, TurnCountTrigger(3), strategy(summarizer))

    assert result.events_removed == 8 and service.event_version(session_id) == version + 1
    window = service.get_events(session_id, EventFilter.active())
    assert [e.is_synthetic for e in window] == [True, True, False, False, False, False]
    assert json.loads(window[1].message.text)["title"] == SUMMARY["title"]
    archived = [e for e in service.get_events(session_id) if e.archived]
    assert len(archived) == 8 and service.get_events(session_id, EventFilter.keyword_search("question 0"))
    prompt = build_system_prompt("You are a shop assistant.", session_id, window)
    assert "<knowledge>" in prompt and "The budget is 1500 EUR" in prompt
    messages = window_as_openai(window, system_prompt=prompt)
    assert messages[0]["role"] == "system" and messages[-1] == {"role": "assistant", "content": "answer 5"}
    [request] = fake_openai.requests
    assert "question 0 about laptops" in request.body["messages"][1]["content"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply.status_code(500), "500"),
        (Reply.slow(3.0), "timed out"),
        (Reply.refused(), "refus"),
        (Reply.malformed_json(), "JSON"),
    ],
    ids=["http-500", "timeout", "refusal", "malformed-json"],
)
def test_a_failing_summarizer_leaves_the_session_untouched_and_says_why(service, fake_openai, reply, reason):
    session_id = conversation(service)
    before = snapshot(service, session_id)
    fake_openai.fallback = reply
    kind = StructuredSummarizer if reason in ("JSON", "refus") else OpenAISummarizer
    summarizer = kind("gpt-4o-mini", base_url=fake_openai.base_url, api_key="k", timeout=1.0, max_retries=0)

    with pytest.raises(SummarizerError) as failure:
        service.compact(session_id, TurnCountTrigger(3), strategy(summarizer))

    assert reason.lower() in str(failure.value).lower()
    assert snapshot(service, session_id) == before
    service.append_message(session_id, UserMessage("still usable"))
    assert service.get_messages(session_id)[-1].text == "still usable"


def test_a_blank_summary_writes_nothing(service, fake_openai):
    session_id = conversation(service)
    before = snapshot(service, session_id)
    fake_openai.enqueue(Reply.blank())
    summarizer = OpenAISummarizer("gpt-4o-mini", base_url=fake_openai.base_url, api_key="k", max_retries=0)

    result = service.compact(session_id, TurnCountTrigger(3), strategy(summarizer))

    assert result.events_removed == 0 and snapshot(service, session_id) == before
