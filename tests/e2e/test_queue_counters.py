"""The operator's figures, for real: `sessionledger stats` against running (and killed) ingest workers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.workers import metrics

from tests.conftest import sql_url
from tests.e2e.queue_deployment import RABBITMQ_URL, Deployment, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]

CLI = str(Path(sys.executable).with_name("sessionledger"))


@pytest.fixture(params=["postgres", "mariadb"])
def deployment(request, tmp_path):
    url = sql_url(request, request.param)
    deployment = Deployment(url, RABBITMQ_URL, tmp_path, partitions=2, ingest_chunk=50)
    yield deployment
    deployment.close()


def stored_events(deployment: Deployment) -> int:
    with deployment.service.ledger.engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM ledger WHERE kind = 'event'")).scalar_one()


def stats(deployment: Deployment) -> dict:
    """What `sessionledger stats --json` shows an operator, run as a separate process."""
    shown = subprocess.run(
        [CLI, "stats", "--json"], env=deployment.env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["counters"]


def publish(deployment: Deployment, sessions: list[str], count: int) -> None:
    with deployment.publisher(max_batch_events=500) as publisher:
        for i in range(count):
            publisher.publish(
                SessionEvent(session_id=sessions[i % len(sessions)], message=UserMessage(f"m{i}"))
            )
        assert publisher.flush(timeout=60)


def test_stats_show_a_batch_while_its_worker_runs_idle(deployment):
    sessions = [deployment.service.create_session("agent").id for _ in range(4)]
    deployment.start("ingest", "ingest")
    deployment.wait_ready("ingest")
    publish(deployment, sessions, 40)
    wait_for(lambda: stored_events(deployment) == 40, 60, "the batch in the ledger")
    counters = stats(deployment)  # the worker is still running, with nothing more to do
    assert counters[metrics.EVENTS_INGESTED] == 40 and counters[metrics.DUPLICATES_SKIPPED] == 0


def test_an_ingest_worker_killed_mid_stream_leaves_the_counters_equal_to_what_is_stored(deployment):
    events = 10_000
    sessions = [deployment.service.create_session("agent").id for _ in range(50)]
    worker = deployment.start("ingest", "ingest")
    deployment.wait_ready("ingest")
    publish(deployment, sessions, events)
    wait_for(
        lambda: stored_events(deployment) >= 1_000, 90, "a first part of the stream stored", interval=0.05
    )
    worker.send_signal(signal.SIGKILL)  # no shutdown handler runs: nothing is flushed on the way out
    worker.wait(10)
    killed_at = stored_events(deployment)
    assert killed_at < events, "the worker must die mid-stream"
    deployment.processes.pop("ingest")

    deployment.start("ingest-again", "ingest")
    wait_for(lambda: stored_events(deployment) == events, 120, "the rest of the stream stored", interval=0.5)
    counters = stats(deployment)
    assert counters[metrics.EVENTS_INGESTED] == stored_events(deployment) == events
