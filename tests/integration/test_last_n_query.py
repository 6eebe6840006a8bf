"""`last_n` is read per window group in SQL (archived, prefix, tail): it must equal the tail of
the full `get_events()` order for every filter, after compactions, appends and a rewind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sessionledger.domain import AssistantMessage, EventFilter, MessageType, SessionEvent, UserMessage
from sessionledger.domain.compaction import RecursiveSummarizationStrategy, TurnCountTrigger
from sessionledger.infrastructure import SessionService, open_service

FILTERS = {
    "all": {},
    "active": {"exclude_archived": True},
    "real": {"exclude_synthetic": True},
    "users": {"message_types": [MessageType.USER]},
    "keyword": {"keyword": "3"},
}


class Summary:
    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return f"summary of {user_prompt.count(chr(10))} lines"


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


def converse(service: SessionService, session_id: str, turns: int, invocation: str) -> None:
    for turn in range(turns):
        for message in (UserMessage(f"question {turn}"), AssistantMessage(f"answer {turn}")):
            event = SessionEvent(session_id=session_id, message=message, invocation_id=invocation)
            service.append_event(event)


def shapes(service: SessionService) -> Iterator[str]:
    """One session after each change of its window's shape."""
    session_id = service.create_session("u", session_id=f"last-{uuid.uuid4().hex[:8]}").id
    compact = RecursiveSummarizationStrategy(Summary(), max_events_to_keep=4, overlap_size=1)
    converse(service, session_id, 8, "first")
    yield session_id  # never compacted: everything is the tail
    assert service.compact(session_id, TurnCountTrigger(1), compact).archived
    yield session_id  # archived, prefix, no tail
    converse(service, session_id, 3, "second")
    yield session_id  # archived, prefix, tail
    assert service.compact(session_id, TurnCountTrigger(1), compact).archived
    converse(service, session_id, 2, "third")
    yield session_id  # a superseded summary among the archived
    service.rewind(session_id, "third")
    yield session_id  # rewound rows hidden


def test_last_n_is_the_tail_of_the_full_order(service: SessionService) -> None:
    for session_id in shapes(service):
        for name, fields in FILTERS.items():
            everything = service.get_events(session_id, EventFilter(**fields))
            for n in (1, 2, 3, 5, 8, len(everything), len(everything) + 3):
                last = service.get_events(session_id, EventFilter(last_n=n, **fields))
                expected = everything[-n:]
                assert [(e.id, e.archived) for e in last] == [(e.id, e.archived) for e in expected], (name, n)
