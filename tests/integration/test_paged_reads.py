"""A page of `get_events` is that slice of the unpaged result, on every backend, for a session with
archived events, a compaction's window prefix and a tail (the SQL reads each group only as far as
the page needs, so a page of a long history costs what the page costs)."""

from __future__ import annotations

import uuid

import pytest
from sessionledger.domain import AssistantMessage, EventFilter, UserMessage
from sessionledger.domain.compaction import RecursiveSummarizationStrategy, TurnCountTrigger
from sessionledger.infrastructure import open_service


class _Summary:
    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "summary: apples were discussed"


@pytest.fixture
def service(database_url):
    with open_service(database_url) as service:
        yield service


def test_every_page_is_the_slice_of_the_whole(service):
    session_id = service.create_session("pager", session_id=f"p-{uuid.uuid4().hex[:10]}").id
    for turn in range(8):
        service.append_message(session_id, UserMessage(f"apples {turn}" if turn % 3 else f"pears {turn}"))
        service.append_message(session_id, AssistantMessage(f"about apples {turn}"))
    strategy = RecursiveSummarizationStrategy(_Summary(), max_events_to_keep=4, overlap_size=1)
    assert service.compact(session_id, TurnCountTrigger(2), strategy).archived
    for turn in range(3):
        service.append_message(session_id, UserMessage(f"later apples {turn}"))
    for base in (
        EventFilter(),
        EventFilter(keyword="APPLES"),
        EventFilter.active(),
        EventFilter(keyword="pears"),
    ):
        whole = service.get_events(session_id, base)
        assert whole, base
        for size in (1, 2, 3, 5):
            for page in range((len(whole) + size - 1) // size + 1):
                paged = base.merge(EventFilter(page=page, page_size=size))
                expected = whole[page * size : (page + 1) * size]
                assert service.get_events(session_id, paged) == expected, (base, page, size)
                got = service.get_events(session_id, paged)
                assert [e.archived for e in got] == [e.archived for e in expected]
