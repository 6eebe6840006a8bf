"""The dead-letter queue on the in-memory transport: what a letter carries, list, replay."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import pytest
from kombu import Connection
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure.queue_names import COMPACT_TASK, INGEST_TASK
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.wire import encode_event
from sessionledger.workers.app import create_app
from sessionledger.workers.dlq import DeadLetter, dead_letters, list_dead, replay_dead

MEMORY = "memory://localhost//"


@pytest.fixture
def celery(tmp_path):
    settings = Settings(
        broker_url=MEMORY,
        queue_prefix=f"d{uuid.uuid4().hex[:8]}",
        partitions=3,
        database_url=f"sqlite:///{tmp_path / 'ledger.db'}",
    )
    return create_app(settings)


def line(session_id: str, text: str) -> str:
    return encode_event(SessionEvent(session_id=session_id, message=UserMessage(text)))


def queued(names, queue_name: str) -> list:
    with Connection(MEMORY) as connection:
        queue = next(q for q in names.all_queues() if q.name == queue_name)(connection.default_channel)
        messages = []
        while (message := queue.get(no_ack=True)) is not None:
            messages.append(message)
        return messages


def test_letters_are_listed_without_being_removed(celery):
    names = celery.sessionledger_settings.queue_names
    sender = dead_letters(celery)
    lines = [line("s1", "a"), line("s1", "b")]
    sender.send(DeadLetter.of_events(lines, names.ingest(0), "unknown session", ["s1"]))
    sender.send(DeadLetter.of_task(COMPACT_TASK, ["s9"], {}, names.compact, "TimeoutError: slow (gave up)"))
    first = list_dead(MEMORY, names)
    assert [letter.reason for letter in first] == ["unknown session", "TimeoutError: slow (gave up)"]
    assert first[0].summary()["events"] == 2 and first[0].session_ids == ["s1"]
    assert first[1].summary() | {"id": None, "dead_at": None} == {
        "id": None,
        "dead_at": None,
        "reason": "TimeoutError: slow (gave up)",
        "queue": names.compact,
        "task": COMPACT_TASK,
        "sessions": ["s9"],
        "events": None,
        "replayable": True,
    }
    assert [letter.id for letter in list_dead(MEMORY, names)] == [letter.id for letter in first]


def test_replay_sends_each_letter_back_to_its_queue_and_removes_it(celery):
    names = celery.sessionledger_settings.queue_names
    sender = dead_letters(celery)
    sessions = [f"s{i}" for i in range(12)]
    lines = [line(s, "x") for s in sessions]
    sender.send(DeadLetter.of_events(lines, names.ingest(0), "unknown session", sessions))
    sender.send(DeadLetter.of_task(COMPACT_TASK, ["s9"], {}, names.compact, "gave up"))
    sender.send(DeadLetter("nothing to replay", names.compact))
    assert replay_dead(MEMORY, names) == 2
    assert [letter.reason for letter in list_dead(MEMORY, names)] == ["nothing to replay"]
    replayed_lines = []
    for partition in range(names.partitions):
        for message in queued(names, names.ingest(partition)):
            assert message.headers["task"] == INGEST_TASK
            for replayed in json.loads(message.body)[0][0]:
                assert names.ingest_for(json.loads(replayed)["session_id"]) == names.ingest(partition)
                replayed_lines.append(replayed)
    assert sorted(replayed_lines) == sorted(lines)
    (compact,) = queued(names, names.compact)
    assert compact.headers["task"] == COMPACT_TASK and json.loads(compact.body)[0] == ["s9"]


def test_a_raw_message_is_kept_byte_for_byte():
    message = SimpleNamespace(
        body=b"\xff not json",
        headers={"task": INGEST_TASK, "id": "m1"},
        delivery_info={"routing_key": "p.ingest.2"},
        content_type="application/json",
    )
    letter = DeadLetter.of_raw_message(message, "undecodable message: bad bytes")
    assert letter.queue == "p.ingest.2" and letter.task == INGEST_TASK
    back = DeadLetter(**json.loads(letter.to_json()))
    assert back == letter
