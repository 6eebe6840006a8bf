"""What the workers and the relay say, at their default level: that they started, where they
connected (no password), and each batch they handle, as one JSON object per line."""

from __future__ import annotations

import json

import pytest
from sessionledger.domain import SessionEvent, UserMessage

from tests.e2e.queue_deployment import RABBITMQ_URL, Deployment, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]

PASSWORD = "s3cret-pw"  # PostgreSQL here trusts local connections: any password is accepted


@pytest.fixture
def deployment(pg_url, tmp_path):
    with_password = pg_url.replace("://postgres@", f"://postgres:{PASSWORD}@", 1)
    assert PASSWORD in with_password
    deployment = Deployment(with_password, RABBITMQ_URL, tmp_path, partitions=1)
    yield deployment
    deployment.close()


def entries(deployment: Deployment, name: str) -> list[dict]:
    """Every line of the process's log that is a log record (Celery's shutdown notices are not)."""
    lines = [line for line in deployment.log_text(name).splitlines() if line.startswith("{")]
    return [json.loads(line) for line in lines]


def said(deployment: Deployment, name: str, message: str) -> list[dict]:
    return [entry for entry in entries(deployment, name) if entry["msg"] == message]


def test_workers_and_relay_log_their_start_where_they_connected_and_each_batch(deployment):
    session = deployment.service.create_session("agent").id
    for name, role in (("ingest", "ingest"), ("tasks", "tasks"), ("relay", "relay")):
        deployment.start(name, role)
    deployment.wait_ready("ingest")
    deployment.wait_ready("tasks")
    with deployment.publisher() as publisher:
        for i in range(3):
            publisher.publish(SessionEvent(session_id=session, message=UserMessage(f"m{i}")))
        assert publisher.flush(timeout=30)
    wait_for(lambda: said(deployment, "tasks", "evaluated"), 60, "the session evaluated")

    broker = "amqp://guest:***@127.0.0.1:5672//"
    database = deployment.database_url.replace(PASSWORD, "***")
    for name in ("ingest", "tasks"):
        (started,) = said(deployment, name, "worker started")
        assert (started["broker"], started["database"]) == (broker, database)
        assert started["node"].startswith(f"{name}-") and started["queues"]
        assert "[config]" not in deployment.log_text(name), "no banner: every record is a JSON line"
    (relay,) = said(deployment, "relay", "relay started")
    assert (relay["broker"], relay["database"]) == (broker, database)

    batches = said(deployment, "ingest", "ingested")  # the publisher may have sent the events in two
    assert sum(batch["stored"] for batch in batches) == 3 and {batch["level"] for batch in batches} == {
        "info"
    }
    woken = said(deployment, "relay", "sessions woken")
    assert woken and all(round["sessions"] == 1 and round["offset"] for round in woken)
    evaluated = said(deployment, "tasks", "evaluated")
    assert {entry["session_id"] for entry in evaluated} == {session}
    for name in ("ingest", "tasks", "relay"):
        assert PASSWORD not in deployment.log_text(name)
