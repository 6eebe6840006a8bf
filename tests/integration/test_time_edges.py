"""Times at the edge of the calendar (issue 25): an aware time UTC has no room for
(`0001-01-01T00:00:00+14:00`, `9999-12-31T23:59:59-14:00`) is a `ValueError` naming it wherever a
time enters, on every backend, and nothing is stored; the latest and earliest times UTC has are kept."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sessionledger.domain import EventFilter, SessionEvent, UserMessage
from sessionledger.infrastructure import audit
from sessionledger.infrastructure.agents import RecallTools

EDGES = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]


@pytest.fixture(params=EDGES)
def edge(request: pytest.FixtureRequest) -> datetime:
    return datetime.fromisoformat(request.param)


def named(edge: datetime) -> str:
    return re.escape(f"{edge.isoformat()} is out of range: in UTC it falls before year 1 or after year 9999")


def test_a_filter_time_that_utc_has_no_room_for_is_a_value_error(service, edge) -> None:
    session_id = service.create_session("u").id
    service.append_message(session_id, UserMessage("kept"))
    for field in ("start", "end"):
        with pytest.raises(ValueError, match=f"^{field} {named(edge)}$"):
            service.get_events(session_id, EventFilter(**{field: edge}))
    answer = RecallTools(service).handle(
        "cross_session_search",
        f'{{"query": "", "since": "{edge.isoformat()}"}}',
        session_id=session_id,
        user_id="u",
    )
    assert re.fullmatch(f"Error: since {named(edge)}", answer)
    with pytest.raises(ValueError, match=f"^the time {named(edge)}$"):
        audit.replay(service, session_id, at=edge)
    with pytest.raises(ValueError, match=f"^now {named(edge)}$"):
        service.delete_expired_sessions(now=edge)
    assert [e.message.text for e in service.get_events(session_id)] == ["kept"]


def test_an_event_time_that_utc_has_no_room_for_is_a_value_error_and_nothing_is_stored(service, edge) -> None:
    session_id = service.create_session("u").id
    with pytest.raises(ValueError, match=f"^timestamp {named(edge)}$"):
        service.append_event(SessionEvent(session_id=session_id, message=UserMessage("x"), timestamp=edge))
    assert service.get_events(session_id) == []
    assert service.event_version(session_id) == 0


def test_the_first_and_last_times_utc_has_are_kept(service) -> None:
    session_id = service.create_session("u").id
    first = datetime(1, 1, 1, tzinfo=UTC)
    last = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    for moment in (first, last):
        service.append_event(SessionEvent(session_id=session_id, message=UserMessage("x"), timestamp=moment))
    within = EventFilter(start=first, end=last)
    assert [e.timestamp for e in service.get_events(session_id, within)] == [first, last]
    at_an_offset = timezone(timedelta(hours=14))  # the same first instant, spelled in another zone
    assert len(service.get_events(session_id, EventFilter(start=first.astimezone(at_an_offset)))) == 2
