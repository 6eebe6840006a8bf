"""The OpenAI summarizers with the real `openai` client, over real HTTP, against the local fake server."""

from __future__ import annotations

import json
import time

import pytest
from sessionledger.domain.compaction.ports import Summarizer
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.summarizers import (
    ExtractiveSummarizer,
    OpenAISummarizer,
    StructuredSummarizer,
    StructuredSummary,
    SummarizerError,
    summarizer_from_settings,
)
from sessionledger.infrastructure.summarizers.structured import SUMMARY_SCHEMA

from tests.fakes.fake_openai import FakeOpenAI, Reply

SUMMARY = {
    "title": "Planning a trip to Lisbon",
    "keywords": ["travel", "lisbon"],
    "summary": "The user planned a three-day trip to Lisbon in May and chose a hotel in Alfama.",
    "key_points": ["Trip in May", "Hotel in Alfama"],
    "key_facts": ["The budget is 1200 EUR"],
    "sentiment": "positive",
    "confidence": 8,
}


def plain(fake: FakeOpenAI, **options) -> OpenAISummarizer:
    return OpenAISummarizer("gpt-4o-mini", base_url=fake.base_url, api_key="test-key", **options)


def structured(fake: FakeOpenAI, **options) -> StructuredSummarizer:
    return StructuredSummarizer("gpt-4o-mini", base_url=fake.base_url, api_key="test-key", **options)


def test_plain_summary_is_the_reply_text_and_the_request_is_a_chat_completion(fake_openai):
    fake_openai.enqueue(Reply.text("  The user asked about Lisbon.  "))
    summarizer = plain(fake_openai)

    assert isinstance(summarizer, Summarizer)
    assert summarizer.summarize("You summarize.", "User: Lisbon?") == "The user asked about Lisbon."
    [request] = fake_openai.requests
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["messages"] == [
        {"role": "system", "content": "You summarize."},
        {"role": "user", "content": "User: Lisbon?"},
    ]
    assert request.body["temperature"] == 0
    assert "response_format" not in request.body
    assert request.headers["authorization"] == "Bearer test-key"


def test_plain_summary_is_bounded_by_max_summary_chars(fake_openai):
    fake_openai.enqueue(Reply.text("word " * 100))
    summary = plain(fake_openai, max_summary_chars=50).summarize("s", "u")
    assert len(summary) <= 50
    assert summary.endswith("…")


def test_temperature_none_is_left_out_of_the_request(fake_openai):
    plain(fake_openai, temperature=None).summarize("s", "u")
    assert "temperature" not in fake_openai.requests[0].body


@pytest.mark.parametrize("make", [plain, structured])
def test_blank_reply_is_no_summary(fake_openai, make):
    fake_openai.enqueue(Reply.blank())
    assert make(fake_openai).summarize("s", "u") is None


def test_server_error_is_retried_then_reported_with_its_status(fake_openai):
    fake_openai.fallback = Reply.status_code(500, "upstream exploded")
    with pytest.raises(SummarizerError, match="HTTP 500") as caught:
        plain(fake_openai, max_retries=2).summarize("s", "u")
    assert len(fake_openai.requests) == 3  # the first try and two retries
    assert caught.value.status_code == 500
    assert caught.value.retryable
    assert "upstream exploded" in str(caught.value)


def test_a_transient_server_error_is_recovered_by_a_retry(fake_openai):
    fake_openai.enqueue(Reply.status_code(503), Reply.text("Recovered."))
    assert plain(fake_openai, max_retries=1).summarize("s", "u") == "Recovered."
    assert len(fake_openai.requests) == 2


def test_client_error_is_not_retryable(fake_openai):
    fake_openai.fallback = Reply.status_code(400, "bad model")
    with pytest.raises(SummarizerError, match="HTTP 400") as caught:
        plain(fake_openai).summarize("s", "u")
    assert len(fake_openai.requests) == 1
    assert not caught.value.retryable


def test_slow_server_times_out(fake_openai):
    fake_openai.fallback = Reply.slow(5)
    started = time.monotonic()
    with pytest.raises(SummarizerError, match=r"timed out after 0\.3s") as caught:
        plain(fake_openai, timeout=0.3, max_retries=0).summarize("s", "u")
    assert time.monotonic() - started < 3
    assert caught.value.retryable


def test_unreachable_server_is_reported():
    summarizer = OpenAISummarizer(
        "m", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0, timeout=2
    )
    with pytest.raises(SummarizerError, match="cannot reach the summarizer"):
        summarizer.summarize("s", "u")


@pytest.mark.parametrize("make", [plain, structured])
def test_refusal_is_an_error(fake_openai, make):
    fake_openai.enqueue(Reply.refused("I can't summarize this."))
    with pytest.raises(SummarizerError, match="refused to summarize: I can't summarize this"):
        make(fake_openai).summarize("s", "u")


def test_a_body_that_is_not_json_is_a_malformed_response(fake_openai):
    fake_openai.enqueue(Reply.garbage())
    with pytest.raises(SummarizerError, match="malformed response"):
        plain(fake_openai).summarize("s", "u")


def test_structured_summary_asks_for_the_strict_schema_and_returns_its_json(fake_openai):
    fake_openai.enqueue(Reply.json(SUMMARY))
    summarizer = structured(fake_openai)

    text = summarizer.summarize("You summarize.", "=== CONVERSATION TO SUMMARIZE ===\nUser: Lisbon?")

    assert json.loads(text) == SUMMARY
    assert StructuredSummary.model_validate_json(text).sentiment == "positive"
    body = fake_openai.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "session_summary", "strict": True, "schema": SUMMARY_SCHEMA},
    }
    system = body["messages"][0]["content"]
    assert system.startswith("You summarize.\n\n")
    assert "Keep the summary field under 1000 characters." in system


def test_structured_instructions_are_configurable(fake_openai):
    fake_openai.enqueue(Reply.json(SUMMARY))
    structured(fake_openai, instructions="Reply in JSON, in French.", max_summary_chars=None).summarize(
        "S.", "u"
    )
    assert fake_openai.requests[0].body["messages"][0]["content"] == "S.\n\nReply in JSON, in French."


def test_structured_summary_field_is_bounded(fake_openai):
    fake_openai.enqueue(Reply.json({**SUMMARY, "summary": "long " * 100}))
    data = json.loads(structured(fake_openai, max_summary_chars=200).summarize("s", "u"))
    assert len(data["summary"]) <= 200
    assert data["title"] == SUMMARY["title"]


def test_structured_malformed_json_is_an_error(fake_openai):
    fake_openai.enqueue(Reply.malformed_json())
    with pytest.raises(SummarizerError, match="malformed JSON"):
        structured(fake_openai).summarize("s", "u")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sentiment": "ecstatic"}, "sentiment"),
        ({"confidence": 11}, "confidence"),
        ({"keywords": "travel"}, "keywords"),
        ({"surprise": True}, "surprise"),
    ],
)
def test_structured_schema_mismatch_is_an_error(fake_openai, change, field):
    fake_openai.enqueue(Reply.json({**SUMMARY, **change}))
    with pytest.raises(SummarizerError, match=f"does not match the summary schema: {field}"):
        structured(fake_openai).summarize("s", "u")


def test_structured_missing_field_is_an_error(fake_openai):
    fake_openai.enqueue(Reply.json({k: v for k, v in SUMMARY.items() if k != "key_facts"}))
    with pytest.raises(SummarizerError, match="key_facts: Field required"):
        structured(fake_openai).summarize("s", "u")


@pytest.fixture
def no_endpoint(monkeypatch):
    """An environment that names no OpenAI endpoint, prefixed or not."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"SESSIONLEDGER_{name}", raising=False)
    monkeypatch.delenv("SESSIONLEDGER_SUMMARIZER_MODEL", raising=False)
    return monkeypatch


def test_factory_without_endpoint_is_offline_and_says_so(caplog, no_endpoint):
    with caplog.at_level("INFO"):
        summarizer = summarizer_from_settings(Settings())
    assert isinstance(summarizer, ExtractiveSummarizer)
    assert "offline" in caplog.text


def test_factory_with_a_base_url_talks_to_that_server_without_a_key(fake_openai, no_endpoint):
    no_endpoint.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    no_endpoint.setenv("SESSIONLEDGER_SUMMARIZER_MODEL", "llama3")
    summarizer = summarizer_from_settings(Settings())
    assert type(summarizer) is OpenAISummarizer
    assert summarizer.summarize("s", "u") == "A fake summary."
    assert fake_openai.requests[0].body["model"] == "llama3"


def test_the_prefixed_variables_win_over_the_openai_packages_own(fake_openai, no_endpoint):
    no_endpoint.setenv("OPENAI_BASE_URL", "http://elsewhere.invalid/v1")
    no_endpoint.setenv("SESSIONLEDGER_OPENAI_BASE_URL", fake_openai.base_url)
    no_endpoint.setenv("OPENAI_API_KEY", "openai-key")
    no_endpoint.setenv("SESSIONLEDGER_OPENAI_API_KEY", "sessionledger-key")
    assert summarizer_from_settings(Settings()).summarize("s", "u") == "A fake summary."
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sessionledger-key"


def test_an_empty_variable_counts_as_unset(no_endpoint):
    no_endpoint.setenv("OPENAI_API_KEY", "")
    no_endpoint.setenv("SESSIONLEDGER_OPENAI_BASE_URL", "")
    assert isinstance(summarizer_from_settings(Settings()), ExtractiveSummarizer)


def test_a_summarizer_without_a_key_or_a_base_url_is_a_clear_error(no_endpoint):
    with pytest.raises(ValueError, match="no OpenAI API key and no base URL"):
        OpenAISummarizer("gpt-4o-mini")


def test_factory_settings_win_over_the_environment(fake_openai, no_endpoint):
    no_endpoint.setenv("OPENAI_BASE_URL", "http://elsewhere.invalid/v1")
    no_endpoint.setenv("OPENAI_API_KEY", "from-env")
    settings = Settings(
        openai_base_url=fake_openai.base_url,
        openai_api_key="from-settings",
        summarizer_model="gpt-4.1-mini",
        summarizer_timeout=7,
        summarizer_max_retries=0,
        summarizer_structured=True,
    )
    summarizer = summarizer_from_settings(settings)
    assert type(summarizer) is StructuredSummarizer
    assert (summarizer.model, summarizer.timeout, summarizer.max_retries) == ("gpt-4.1-mini", 7, 0)
    fake_openai.enqueue(Reply.json(SUMMARY))
    assert json.loads(summarizer.summarize("s", "u"))["title"] == SUMMARY["title"]
    assert fake_openai.requests[0].headers["authorization"] == "Bearer from-settings"
