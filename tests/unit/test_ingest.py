"""The ingest task's core on the in-memory ledger: decoding, poison events, idempotence, order."""

from __future__ import annotations

import json

import pytest

from domain import SessionEvent, UserMessage
from infrastructure import open_service
from infrastructure.publisher import encode_event
from workers.tasks import IngestReport, decode_lines, store


@pytest.fixture
def service():
    with open_service("memory://", max_payload_bytes=2_000) as service:
        yield service


def lines_for(session_id: str, texts: list[str]) -> list[str]:
    return [encode_event(SessionEvent(session_id=session_id, message=UserMessage(text))) for text in texts]


def ingest(service, lines: list[str]) -> IngestReport:
    report = IngestReport()
    store(service, decode_lines(lines, report), report)
    return report


def texts(service, session_id: str) -> list[str]:
    return [event.message.text for event in service.get_events(session_id)]


def test_a_batch_is_stored_in_order_and_a_second_delivery_stores_nothing(service):
    a, b = service.create_session("u").id, service.create_session("u").id
    batch = lines_for(a, ["a1", "a2"]) + lines_for(b, ["b1"]) + lines_for(a, ["a3"])
    first = ingest(service, batch)
    assert (first.stored, first.duplicates, first.poison) == (4, 0, {})
    again = ingest(service, batch)
    assert (again.stored, again.duplicates) == (0, 4)
    assert texts(service, a) == ["a1", "a2", "a3"] and texts(service, b) == ["b1"]
    assert service.event_version(a) == 3


def test_poison_events_are_rejected_alone_with_their_reason_and_the_rest_is_stored(service):
    good = service.create_session("u").id
    oversized = lines_for(good, ["x" * 5_000])[0]
    unknown = lines_for("no-such-session", ["lost"])[0]
    not_an_event = json.dumps({"id": "e1", "session_id": good, "event": {"message": "nope"}})
    batch = [
        *lines_for(good, ["one"]),
        "{not json",
        oversized,
        *lines_for(good, ["two"]),
        unknown,
        not_an_event,
        "[1, 2]",
        *lines_for(good, ["three"]),
    ]
    report = ingest(service, batch)
    assert report.stored == 3
    assert texts(service, good) == ["one", "two", "three"]
    reasons = {
        reason.split(":")[0]: [line for line, _ in rejected] for reason, rejected in report.poison.items()
    }
    assert reasons["malformed JSON"] == ["{not json"]
    assert reasons["unknown session (never created, or deleted)"] == [unknown]
    invalid = [
        line
        for reason, rejected in report.poison.items()
        if reason.startswith("invalid event")
        for line, _ in rejected
    ]
    assert sorted(invalid) == sorted([oversized, not_an_event, "[1, 2]"])
    over_limit = next(reason for reason, rejected in report.poison.items() if rejected[0][0] == oversized)
    assert "payload limit" in over_limit
    sessions = {session for rejected in report.poison.values() for _, session in rejected}
    assert sessions == {None, good, "no-such-session"}


def test_an_invalid_event_costs_a_few_transactions_not_one_per_event(service):
    session = service.create_session("u").id
    calls = []
    ingest_batch = service.ingest

    def counting(events):
        calls.append(len(events))
        return ingest_batch(events)

    service.ingest = counting
    batch = lines_for(session, [f"m{i}" for i in range(500)])
    batch[321] = lines_for(session, ["y" * 5_000])[0]
    report = ingest(service, batch)
    assert report.stored == 499 and len(calls) < 25
    assert texts(service, session) == [f"m{i}" for i in range(500) if i != 321]
