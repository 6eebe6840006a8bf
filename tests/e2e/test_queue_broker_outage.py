"""The broker goes down while agents publish, and comes back: nothing lost, and the bound holds.

The broker is a private redis-server started for this test (append-only file, so a restart keeps
what it had confirmed), never the machine's shared broker.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from domain import SessionEvent, UserMessage
from infrastructure.publisher import PublisherFull
from tests.e2e.queue_deployment import Deployment, RedisServer, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

BOUND = 3_000


@pytest.fixture
def broker(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


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
