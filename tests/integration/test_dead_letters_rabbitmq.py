"""RabbitMQ's own dead-lettering (the queues' x-dead-letter-exchange) next to ours, listed and replayed."""

from __future__ import annotations

import json
import uuid

import pytest
from kombu import Connection, Producer
from sessionledger.infrastructure.queue_names import COMPACT_TASK, QueueNames
from sessionledger.infrastructure.wire import task_message
from sessionledger.workers.dlq import list_dead, replay_dead

from tests.e2e.queue_deployment import RABBITMQ_URL, remove_queues

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
def names():
    names = QueueNames(f"sltest-{uuid.uuid4().hex[:10]}", 2)
    with Connection(RABBITMQ_URL) as connection:
        channel = connection.channel()
        for queue in names.all_queues():
            queue(channel).declare()
    yield names
    remove_queues(RABBITMQ_URL, names)


def test_a_message_the_broker_dead_lettered_is_listed_with_its_origin_and_replayed_there(names):
    headers, body = task_message(COMPACT_TASK, ["session-7"])
    with Connection(RABBITMQ_URL, transport_options={"confirm_publish": True}) as connection:
        channel = connection.channel()
        Producer(channel).publish(
            body, exchange=names.exchange, routing_key=names.compact, headers=headers,
            content_type="application/json", content_encoding="utf-8",
        )  # fmt: skip
        names.compact_queue(channel).get(no_ack=False).reject(requeue=False)  # -> the queue's DLX

    (letter,) = list_dead(RABBITMQ_URL, names)
    assert letter.reason == "rejected by the broker"
    assert (letter.queue, letter.task) == (names.compact, COMPACT_TASK)
    assert replay_dead(RABBITMQ_URL, names) == 1
    assert list_dead(RABBITMQ_URL, names) == []
    with Connection(RABBITMQ_URL) as connection:
        message = names.compact_queue(connection.channel()).get(no_ack=True)
    assert json.loads(message.body)[0] == ["session-7"]
    assert message.headers["task"] == COMPACT_TASK and "x-death" not in message.headers
