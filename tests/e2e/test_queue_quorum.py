"""RabbitMQ quorum queues (`SESSIONLEDGER_QUEUE_TYPE=quorum`): several ingest workers, under
different node names, consume the same partitions (one active consumer per partition, the others
standing by); the active one is killed in the middle of a batch, and a standby takes the partition
over: every event is stored once, in publish order."""

from __future__ import annotations

import json
import signal
from collections import Counter, defaultdict

import psutil
import pytest
import sqlalchemy as sa
from kombu import Connection
from sessionledger.domain import SessionEvent, UserMessage

from tests.e2e.queue_deployment import RABBITMQ_URL, Deployment, event_rows, stored_order, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]

SESSIONS = 20
EVENTS = 2_000
WORKERS = ("ingest-a", "ingest-b", "ingest-c")


@pytest.fixture
def deployment(pg_url, tmp_path):
    deployment = Deployment(pg_url, RABBITMQ_URL, tmp_path, partitions=2, queue_type="quorum")
    yield deployment
    deployment.close()


def waiting_worker(deployment: Deployment, engine: sa.Engine) -> str | None:
    """The worker whose database connection waits for a row lock: the one mid-batch."""
    with engine.connect() as conn:
        ports = {
            port
            for (port,) in conn.execute(
                sa.text(
                    "SELECT client_port FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            )
        }
    for name, process in deployment.processes.items():
        if process.poll() is None and any(
            c.laddr.port in ports for c in psutil.Process(process.pid).net_connections(kind="tcp")
        ):
            return name
    return None


def refuses_classic(deployment: Deployment) -> bool:
    """Whether RabbitMQ refuses every ingest queue redeclared as a classic queue (PRECONDITION_FAILED:
    it holds them as another type, the quorum type the workers declared)."""
    with Connection(deployment.broker_url) as connection:
        for queue in deployment.names.ingest_queues():
            as_classic = {**queue.queue_arguments, "x-queue-type": "classic"}
            channel = connection.channel()
            try:
                channel.queue_declare(queue.name, durable=True, arguments=as_classic)
            except connection.channel_errors:
                continue
            return False
    return True


def test_a_killed_active_consumer_loses_duplicates_and_reorders_nothing(deployment: Deployment) -> None:
    service = deployment.service
    engine = service.ledger.engine
    sessions = [service.create_session("agent").id for _ in range(SESSIONS)]
    for name in WORKERS:  # every worker consumes both partitions
        deployment.start(name, "ingest", "--partitions=0-1")
    for name in WORKERS:
        deployment.wait_ready(name)
    nodes = {json.loads(line)["node"] for name in WORKERS for line in started_lines(deployment, name)}
    assert len(nodes) == len(WORKERS)  # three node names on the same partitions

    published: dict[str, list[str]] = defaultdict(list)
    with engine.connect() as blocker, deployment.publisher(max_batch_events=50) as publisher:
        # one session's row is locked: the batch holding its first event stops mid-write
        blocker.execute(sa.text("SELECT 1 FROM sessions WHERE id = :id FOR UPDATE"), {"id": sessions[0]})
        for i in range(EVENTS):
            event = SessionEvent(session_id=sessions[i % SESSIONS], message=UserMessage(f"event {i}"))
            publisher.publish(event)
            published[event.session_id].append(event.id)
        assert publisher.flush(timeout=60)
        victim = wait_for(lambda: waiting_worker(deployment, engine), 60, "a worker mid-batch")
        deployment.processes[victim].send_signal(signal.SIGKILL)
        deployment.processes[victim].wait(30)
        # a standby takes the partition over and is delivered the killed worker's batch first
        wait_for(
            lambda: (w := waiting_worker(deployment, engine)) is not None and w != victim,
            60,
            "a standby on the killed worker's batch",
        )
        blocker.rollback()
    wait_for(lambda: len(event_rows(engine)) >= EVENTS, 120, "every event stored", interval=0.5)

    rows = event_rows(engine)
    assert len(rows) == EVENTS
    assert not [key for key, n in Counter((s, e) for s, e, _ in rows).items() if n > 1]
    assert stored_order(rows) == published
    assert refuses_classic(deployment)


def started_lines(deployment: Deployment, name: str) -> list[str]:
    return [line for line in deployment.log_text(name).splitlines() if '"worker started"' in line]
