"""`stats` and `dlq list` read the broker and leave it as they found it, on RabbitMQ and Redis:
a mistyped queue prefix reads as queues that do not exist, and creates no queue, exchange or key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kombu import Connection, Exchange, Queue
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.queue_names import QueueNames
from sessionledger.workers.app import REDIS_ORDER_CAVEAT

from tests.e2e.queue_deployment import RABBITMQ_URL, REDIS_URL, remove_queues

CLI = str(Path(sys.executable).with_name("sessionledger"))
BROKERS = [
    pytest.param(RABBITMQ_URL, marks=pytest.mark.rabbitmq, id="rabbitmq"),
    pytest.param(REDIS_URL, marks=pytest.mark.redis, id="redis"),
]


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Iterator[QueueNames]:
    names = QueueNames(f"slread-{uuid.uuid4().hex[:10]}", 2)
    yield names
    remove_queues(request.node.callspec.params["broker"], names)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url):
        pass
    return url


def run(names: QueueNames, broker: str, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    env.update(COLUMNS="200", SESSIONLEDGER_QUEUE_PREFIX=names.prefix, SESSIONLEDGER_PARTITIONS="2")
    command = [CLI, *args, "--database-url", url, "--broker-url", broker]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def left_on_the_broker(broker: str, names: QueueNames) -> list[str]:
    """Every queue, exchange or key of that prefix the broker holds."""
    if broker.startswith("redis"):
        return sorted(key.decode() for key in redis.Redis.from_url(broker).scan_iter(f"*{names.prefix}*"))
    found = []
    with Connection(broker) as connection:
        for queue in names.all_queues():
            channel = connection.channel()
            try:
                channel.queue_declare(queue.name, passive=True)
                found.append(queue.name)
            except connection.channel_errors:
                pass  # 404 NOT_FOUND, and the channel is closed
        for exchange in (names.prefix, names.dead):
            channel = connection.channel()
            try:
                channel.exchange_declare(exchange, "direct", passive=True)
                found.append(exchange)
            except connection.channel_errors:
                pass
    return found


@pytest.mark.parametrize("broker", BROKERS)
def test_reading_a_prefix_with_no_queues_says_so_and_creates_nothing(broker, names, url):
    listed = run(names, broker, url, "dlq", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"no dead-letter queue {names.dead} on this broker" in listed.stdout
    as_json = run(names, broker, url, "dlq", "list", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == []
    replayed = run(names, broker, url, "dlq", "replay")
    assert replayed.returncode == 0 and "no dead-letter queue" in replayed.stdout
    replayed = run(names, broker, url, "dlq", "replay", "--json")
    assert json.loads(replayed.stdout) == {"replayed": 0} and "no dead-letter queue" in replayed.stderr

    shown = run(names, broker, url, "stats")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("does not exist") == len(names.all_queues())
    stats = json.loads(run(names, broker, url, "stats", "--json").stdout)
    assert stats["queues"] == {q.name: {"exists": False, "messages": None} for q in names.all_queues()}
    assert left_on_the_broker(broker, names) == []


@pytest.mark.parametrize("broker", BROKERS)
def test_stats_tell_an_empty_queue_from_a_missing_one(broker, names, url):
    with Connection(broker) as connection:
        channel = connection.channel()
        for queue in names.all_queues():
            queue(channel).declare()
        with connection.Producer(channel) as producer:
            producer.publish({"n": 1}, exchange=names.exchange, routing_key=names.evaluate)
        channel.close()
    stats = json.loads(run(names, broker, url, "stats", "--json").stdout)
    queues = stats["queues"]
    assert queues[names.evaluate] == {"exists": True, "messages": 1}
    assert queues[names.dead] == {"exists": True, "messages": 0}, "declared and empty"
    listed = run(names, broker, url, "dlq", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [] and not listed.stderr


@pytest.mark.parametrize("broker", BROKERS)
def test_stats_show_the_brokers_ordering_caveat_on_redis_only(broker, names, url):
    caveat = json.loads(run(names, broker, url, "stats", "--json").stdout)["caveat"]
    shown = run(names, broker, url, "stats").stdout
    if broker.startswith("redis"):
        assert caveat == REDIS_ORDER_CAVEAT
        assert "caveat: Redis does not keep per-session order across a worker crash" in shown
    else:
        assert caveat is None and "caveat" not in shown


@pytest.mark.rabbitmq
def test_declared_queue_helpers_agree_with_kombu():
    """Guard for the test itself: an exchange declared here is seen by `left_on_the_broker`."""
    names = QueueNames(f"slread-{uuid.uuid4().hex[:10]}", 1)
    try:
        with Connection(RABBITMQ_URL) as connection:
            Exchange(names.dead, "direct", durable=True)(connection.channel()).declare()
            Queue(names.dead, Exchange(names.dead, "direct", durable=True), names.dead)(
                connection.channel()
            ).declare()
        assert left_on_the_broker(RABBITMQ_URL, names) == [names.dead, names.dead]
    finally:
        remove_queues(RABBITMQ_URL, names)
