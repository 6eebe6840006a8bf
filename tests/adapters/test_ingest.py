"""The ingest task's core on the in-memory ledger: decoding, poison events, idempotence, order."""

from __future__ import annotations

import json
import time

import pytest
import sqlalchemy as sa
from celery.exceptions import Reject
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import Settings, open_service
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.wire import encode_event
from sessionledger.workers import metrics
from sessionledger.workers.metrics import read_counters
from sessionledger.workers.tasks import IngestReport, decode_lines, store, store_with_patience


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


def test_the_ledger_write_of_a_batch_counts_what_it_stored_and_skipped():
    with open_storage(Settings(database_url="memory://")) as storage:
        session = storage.service.create_session("u").id
        batch = lines_for(session, ["a1", "a2", "a3"])
        ingest(storage.service, batch[:2])
        ingest(storage.service, batch)
        counted = read_counters(storage.counters)
    assert (counted[metrics.EVENTS_INGESTED], counted[metrics.DUPLICATES_SKIPPED]) == (3, 2)


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

    def counting(events, **options):
        calls.append(len(events))
        return ingest_batch(events, **options)

    service.ingest = counting
    batch = lines_for(session, [f"m{i}" for i in range(500)])
    batch[321] = lines_for(session, ["y" * 5_000])[0]
    report = ingest(service, batch)
    assert report.stored == 499 and len(calls) < 25
    assert texts(service, session) == [f"m{i}" for i in range(500) if i != 321]


class Outage:
    """The service, with its database failing on the given calls of `ingest` (1-based)."""

    def __init__(self, service, failing) -> None:
        self.service, self.failing, self.calls = service, failing, 0

    def ingest(self, events, **options):
        self.calls += 1
        if self.calls in self.failing:
            raise sa.exc.OperationalError("INSERT", {}, ConnectionRefusedError("database restarting"))
        return self.service.ingest(events, **options)


def test_a_database_outage_is_waited_out_in_place_and_what_it_found_is_counted_once(service, monkeypatch):
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    session = service.create_session("u").id
    lines = lines_for(session, ["a", "x" * 5_000, "c"])
    report = IngestReport()
    items = decode_lines(lines, report)
    # calls: all (invalid) -> [a] stored -> [big, c] -> [big] rejected -> [c] fails: the try is abandoned
    store_with_patience(Outage(service, failing={5}), items, report, time.monotonic() + 60)
    assert texts(service, session) == ["a", "c"]
    assert report.stored + report.duplicates == 2
    assert [len(rejected) for rejected in report.poison.values()] == [1]


def test_a_long_outage_puts_the_batch_back_on_its_queue(service, monkeypatch):
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    session = service.create_session("u").id
    report = IngestReport()
    items = decode_lines(lines_for(session, ["a"]), report)
    with pytest.raises(Reject) as rejected:
        store_with_patience(Outage(service, failing=range(1, 10**6)), items, report, time.monotonic() + 0.05)
    assert rejected.value.requeue is True
    assert texts(service, session) == [] and report.stored == 0
