"""The dead-letter replay's order rule on every backend: a replayed event never lands after later
events of its session; it stays dead-lettered instead, with the reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.wire import encode_event
from sessionledger.workers.dlq import replay_refusal
from sessionledger.workers.tasks import IngestReport, decode_lines, store_with_patience

from tests.fakes.compaction import Always, SummarizeAllButTwo

NOW = datetime.now(UTC)


@pytest.fixture
def service(database_url):
    with open_service(database_url) as service:
        yield service


def event(session_id: str, text: str, minutes_ago: float) -> SessionEvent:
    return SessionEvent(
        session_id=session_id, message=UserMessage(text), timestamp=NOW - timedelta(minutes=minutes_ago)
    )


def texts(service, session_id: str) -> list[str]:
    return [e.message.text for e in service.get_events(session_id)]


def test_an_event_older_than_what_its_session_holds_is_refused(service):
    session = service.create_session("u").id
    service.append_event(event(session, "newer", minutes_ago=1))
    refusal = replay_refusal(service, event(session, "older", minutes_ago=2))
    assert refusal is not None and refusal.startswith("replay refused")


def test_an_event_newer_than_everything_its_session_holds_may_be_stored(service):
    session = service.create_session("u").id
    service.append_event(event(session, "earlier", minutes_ago=2))
    assert replay_refusal(service, event(session, "later", minutes_ago=1)) is None
    assert replay_refusal(service, event("no-such-session", "lost", minutes_ago=1)) is None


def test_an_event_already_stored_is_a_duplicate_not_a_refusal(service):
    session = service.create_session("u").id
    first = event(session, "first", minutes_ago=2)
    service.append_event(first)
    service.append_event(event(session, "second", minutes_ago=1))
    assert replay_refusal(service, first) is None


def test_a_summary_written_after_the_event_is_not_a_later_event(service):
    session = service.create_session("u").id
    for i in range(4):
        service.append_event(event(session, f"m{i}", minutes_ago=10 - i))
    service.compact(session, Always(), SummarizeAllButTwo())  # its summary is timestamped now
    assert replay_refusal(service, event(session, "dead-lettered a minute ago", minutes_ago=1)) is None


def test_a_replayed_batch_stores_what_keeps_the_order_and_rejects_the_rest_with_the_reason(service):
    behind, clear = service.create_session("u").id, service.create_session("u").id
    service.append_event(event(behind, "newer", minutes_ago=1))
    lines = [encode_event(event(behind, "older", minutes_ago=2)), encode_event(event(clear, "late", 1))]
    report = IngestReport()
    store_with_patience(service, decode_lines(lines, report), report, deadline=float("inf"), replayed=True)
    assert report.stored == 1
    assert texts(service, behind) == ["newer"] and texts(service, clear) == ["late"]
    ((reason, rejected),) = report.poison.items()
    assert reason.startswith("replay refused") and rejected == [(lines[0], behind)]
