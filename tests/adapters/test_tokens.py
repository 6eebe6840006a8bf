"""The token counter `estimator=None` means: the request's own, else the fallback plugged into the domain."""

from __future__ import annotations

import pytest
from sessionledger.domain import tokens
from sessionledger.domain.compaction import CompactionRequest, SlidingWindowStrategy, TokenCountTrigger
from sessionledger.infrastructure.settings import DEFAULT_MODEL
from sessionledger.infrastructure.tokens import counter_for

from tests.unit.compaction_support import SESSION, assistant, user


@pytest.fixture
def fallback(monkeypatch):
    """Stands in for the plugged-in fallback; records each time it is asked."""
    asked: list[int] = []

    def factory():
        asked.append(1)
        return len

    monkeypatch.setattr(tokens, "_fallback", factory)
    return asked


def test_the_package_plugs_in_tiktoken_for_the_default_model():
    assert tokens.fallback_counter() is counter_for(DEFAULT_MODEL)


def test_without_a_plugged_in_counter_the_error_says_what_to_pass(monkeypatch):
    monkeypatch.setattr(tokens, "_fallback", None)
    with pytest.raises(RuntimeError, match="counter="):
        tokens.fallback_counter()


def test_a_request_carrying_a_counter_never_asks_for_the_fallback(fallback):
    events = [user("abcd"), assistant("efgh")]  # "User: abcd", "Assistant: efgh": 10 and 15 characters
    carried = CompactionRequest.of(SESSION, events, counter=lambda text: len(text) // 5)
    assert TokenCountTrigger(5).should_compact(carried)
    assert not TokenCountTrigger(6).should_compact(carried)
    assert fallback == []


def test_a_request_built_without_a_counter_asks_for_the_fallback_once(fallback):
    events = [user("abcd"), assistant("efgh"), user("ijkl")]
    assert TokenCountTrigger(35).should_compact(CompactionRequest.of(SESSION, events))
    assert fallback == [1]


def test_stored_counts_win_over_the_requests_counter(fallback):
    events = [user("a1"), assistant("b1"), user("a2"), assistant("b2")]
    stored = {event.id: 100 for event in events}
    request = CompactionRequest.of(SESSION, events, None, stored, counter=len)
    result = SlidingWindowStrategy(max_events=2).compact(request)
    assert result.tokens_saved == 200
    assert fallback == []
