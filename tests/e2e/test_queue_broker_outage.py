"""The broker goes down while agents publish, and comes back: nothing lost, and the bound holds.

Two brokers: a private redis-server started for this test (append-only file, so a restart keeps
what it had confirmed), and the machine's RabbitMQ, whose application is stopped and started again
with `rabbitmqctl stop_app` / `start_app` (durable queues and persistent messages survive it; the
fixture always starts it again).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict

import pytest
from kombu import Connection
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure.publisher import PublisherFull

from tests.e2e.queue_deployment import Deployment, RedisServer, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.exclusive]

BOUND = 3_000


class RabbitApp:
    """The local RabbitMQ node's application, stopped and started in place."""

    url = "amqp://guest:guest@127.0.0.1:5672//"

    def stop(self) -> None:
        subprocess.run(["rabbitmqctl", "-q", "stop_app"], check=True, timeout=120)

    def start(self) -> None:
        subprocess.run(["rabbitmqctl", "-q", "start_app"], check=True, timeout=120)
        wait_for(self._accepts_connections, 60, "RabbitMQ to accept connections")

    def _accepts_connections(self) -> bool:
        try:
            with Connection(self.url, connect_timeout=2) as connection:
                connection.ensure_connection(max_retries=0)
            return True
        except Exception:
            return False


LOCAL_RABBITMQ = pytest.mark.skipif(
    shutil.which("rabbitmqctl") is None, reason="needs a local RabbitMQ node (rabbitmqctl) to stop and start"
)


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=[pytest.mark.rabbitmq, LOCAL_RABBITMQ])])
def broker(request, tmp_path):
    server = RedisServer(tmp_path) if request.param == "redis" else RabbitApp()
    server.start()
    try:
        yield server
    finally:
        if request.param == "redis":
            server.stop()
        else:
            server.start()  # whatever happened, leave the shared broker running


def test_events_published_while_the_broker_is_down_are_delivered_when_it_is_back(broker, pg_url, tmp_path):
    deployment = Deployment(
        pg_url,
        broker.url,
        tmp_path,
        partitions=2,
        redelivery_horizon=20,
        task_time_limit=8,
        task_soft_time_limit=5,
        ingest_patience=5,
    )
    try:
        service = deployment.service
        sessions = [service.create_session("agent").id for _ in range(20)]
        deployment.start("ingest", "ingest")
        published: dict[str, list[str]] = defaultdict(list)
        counter = iter(range(10**9))

        def publish(publisher) -> None:
            n = next(counter)
            event = SessionEvent(session_id=sessions[n % len(sessions)], message=UserMessage(f"m{n}"))
            publisher.publish(event)
            published[event.session_id].append(event.id)

        with deployment.publisher(max_buffered=BOUND, max_backoff=0.2) as publisher:
            for _ in range(1_000):
                publish(publisher)
            assert publisher.flush(timeout=30)
            wait_for(lambda: total(service, sessions) == 1_000, 60, "the first thousand events")

            broker.stop()
            with pytest.raises(PublisherFull):
                for _ in range(BOUND + 1):
                    publish(publisher)
            assert publisher.pending == BOUND  # held in memory, up to the bound and no further
            assert publisher.flush(timeout=1) is False

            broker.start()
            assert publisher.flush(timeout=60)
            assert publisher.send_failures > 0

        wait_for(lambda: total(service, sessions) == 1_000 + BOUND, 90, "every accepted event", interval=0.5)
        for session in sessions:
            assert [event.id for event in service.get_events(session)] == published[session]
    finally:
        deployment.close()


def total(service, sessions: list[str]) -> int:
    return sum(service.event_version(session) for session in sessions)
