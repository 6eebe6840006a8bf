"""A database that stops accepting connections for a while (a failover): the tasks that meet it wait
it out and complete instead of being dead-lettered, and the relay says why its rounds fail."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import psycopg
import pytest
from sessionledger.domain import AssistantMessage, UserMessage

from tests.conftest import PG_ADMIN_URL
from tests.e2e.queue_deployment import RABBITMQ_URL, Deployment, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]

PASSWORD = "s3cret-pw"  # PostgreSQL here trusts local connections: any password is accepted
POLICY = """
apps.default.trigger = { type = "turns", max_turns = 2 }
apps.default.strategy = { type = "sliding", max_events = 2 }
"""
OUTAGE = 10.0


@pytest.fixture
def deployment(pg_url, tmp_path):
    deployment = Deployment(
        pg_url.replace("://postgres@", f"://postgres:{PASSWORD}@", 1),
        RABBITMQ_URL,
        tmp_path,
        partitions=1,
        policy=POLICY,
        max_retries=2,  # the old rule: three tries within a few seconds, then the dead-letter queue
        database_retry_window=30,
    )
    yield deployment
    deployment.close()


@contextmanager
def refusing_connections(database: str):
    """The database refuses new connections and its open ones are cut, until the block ends."""
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [database]
            )
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


def compacted(deployment: Deployment, session_id: str) -> bool:
    return len(deployment.service.get_messages(session_id)) == 2


def test_tasks_wait_out_a_database_outage_and_the_relay_logs_why_its_rounds_fail(deployment):
    service = deployment.service
    sessions = [service.create_session("agent").id for _ in range(5)]
    for session in sessions:
        for turn in range(3):
            service.append_message(session, UserMessage(f"question {turn}"))
            service.append_message(session, AssistantMessage(f"answer {turn}"))
    deployment.start("relay", "relay")
    wait_for(lambda: deployment.storage.relay_positions.lag("evaluate") == 0, 30, "the relay caught up")
    # the evaluations wait in their queue: the task worker starts once the database is down

    with refusing_connections(deployment.database_url.rsplit("/", 1)[1]):
        deployment.start("tasks", "tasks", "--concurrency=2")
        deployment.wait_ready("tasks")
        time.sleep(OUTAGE)
        assert not deployment.dead_letters(), "dead-lettered during the outage"
    wait_for(lambda: all(compacted(deployment, s) for s in sessions), 90, "every session compacted")
    assert deployment.dead_letters() == []

    failed = [
        json.loads(line)
        for line in deployment.log_text("relay").splitlines()
        if line.startswith("{") and "relay round failed" in line
    ]
    assert failed, "the relay met the outage"
    assert failed[0]["level"] == "warning" and failed[0]["error"].startswith("OperationalError: ")
    assert "not currently accepting connections" in deployment.log_text("relay")
    for name in ("relay", "tasks"):
        assert PASSWORD not in deployment.log_text(name)
