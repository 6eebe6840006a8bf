"""A batch (`SessionService.ingest`: COPY on PostgreSQL, executemany on SQLite) stores each event
exactly as the one-event append stores it: the same payload, times, flags and counts, whatever the
values hold (control characters, backslashes, text in any script, another time zone, microseconds
at their edges, a branch, a synthetic event, tool calls and responses), on every backend."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sessionledger.domain import (
    AssistantMessage,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import verify

ELSEWHERE = timezone(timedelta(hours=-7, minutes=-30))
AWKWARD = 'tab\tnewline\ncr\r backslash\\ \\N \\. quote" comma, é 漢字 🙂 \u200b'


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as opened:
        yield opened


def _events(session_id: str) -> list[SessionEvent]:
    moments = [
        datetime(2025, 1, 1, tzinfo=UTC),
        datetime(2025, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(2025, 6, 30, 23, 59, 59, 999_999, tzinfo=ELSEWHERE),
        datetime(1999, 12, 31, 12, tzinfo=ELSEWHERE),
        datetime(2030, 2, 28, 1, 2, 3, 500_000, tzinfo=UTC),
    ]
    messages = [
        UserMessage(AWKWARD, metadata={"k": AWKWARD, "n": 2**63 - 1}),
        AssistantMessage(None, [ToolCall("c1", "f", '{"x": "a\\tb"}')]),
        ToolResponseMessage([ToolResponse("c1", "f", AWKWARD)]),
        UserMessage(""),
        AssistantMessage("a summary", metadata={}),
    ]
    return [
        SessionEvent(
            id=f"e{n}-{uuid.uuid4().hex[:6]}",
            session_id=session_id,
            message=message,
            timestamp=moment,
            branch="root.child" if n == 1 else None,
            metadata={SessionEvent.SYNTHETIC: True} if n == 4 else {"where": AWKWARD},
            invocation_id=f"inv-{n}",
            state_delta={"count": n, "text": AWKWARD},
        )
        for n, (message, moment) in enumerate(zip(messages, moments, strict=True))
    ]


def _stored(service: SessionService, session_id: str) -> list[tuple[object, ...]]:
    """Each event's record as stored, less what depends on where it sits (positions, versions,
    chain hashes); the session's creation record, which differs per session, left out."""
    return [
        (r.event_id, r.kind, r.occurred_at, r.event_type, r.branch, r.synthetic, r.payload, r.content_hash)
        for r in service.records(session_id)[1:]
    ]


def test_a_batch_stores_each_event_as_an_append_does(service: SessionService):
    one_by_one = service.create_session("u", app_name="batch").id
    batched = service.create_session("u", app_name="batch").id
    events = _events(batched)
    for event in events:
        service.append_event(dataclasses.replace(event, session_id=one_by_one))
    service.ingest(events)
    assert _stored(service, batched) == _stored(service, one_by_one)
    assert len(_stored(service, batched)) == len(events)
    read = service.get_events(batched)
    assert [(e.id, e.message, e.timestamp, e.branch, e.metadata, e.state_delta) for e in read] == [
        (e.id, e.message, e.timestamp, e.branch, e.metadata, e.state_delta) for e in events
    ]
    assert all(e.timestamp.tzinfo is UTC for e in read)
    assert verify(service, batched).ok and verify(service, one_by_one).ok
