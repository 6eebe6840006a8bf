"""An ingest worker started before its database: it waits for it as for any outage, and loses nothing."""

from __future__ import annotations

import uuid
from collections import defaultdict

import psycopg
import pytest
import sqlalchemy as sa
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import Settings
from sessionledger.infrastructure.bootstrap import open_storage

from tests.conftest import PG_ADMIN_URL
from tests.e2e.queue_deployment import RABBITMQ_URL, Deployment, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.rabbitmq]

SESSIONS = 10
EVENTS = 1_000


def admin(statement: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)


def test_an_ingest_worker_started_before_its_database_exists_waits_for_it(tmp_path):
    """The worker's database appears only after the events were published (a database made ready
    under another name, then renamed): every batch waits in place, then all events are stored in
    publish order and nothing is dead-lettered."""
    name = f"sl_test_{uuid.uuid4().hex[:12]}"
    staging = f"{name}_staging"
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    admin(f'CREATE DATABASE "{staging}"')
    deployment = Deployment(f"{base}/{name}", RABBITMQ_URL, tmp_path, partitions=2)
    try:
        with open_storage(Settings(database_url=f"{base}/{staging}")) as storage:
            sessions = [storage.service.create_session("agent").id for _ in range(SESSIONS)]
        deployment.start("ingest", "ingest")
        deployment.wait_ready("ingest")
        published: dict[str, list[str]] = defaultdict(list)
        with deployment.publisher() as publisher:
            for i in range(EVENTS):
                event = SessionEvent(session_id=sessions[i % SESSIONS], message=UserMessage(f"m{i}"))
                publisher.publish(event)
                published[event.session_id].append(event.id)
        wait_for(
            lambda: "database unavailable, retrying" in deployment.log_text("ingest"),
            30,
            "the worker waiting for its database",
        )

        admin(f'ALTER DATABASE "{staging}" RENAME TO "{name}"')

        engine = deployment.service.ledger.engine

        def stored() -> dict[str, list[str]]:
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.text("SELECT session_id, event_id FROM ledger WHERE kind = 'event' ORDER BY position")
                )
                by_session = defaultdict(list)
                for session_id, event_id in rows:
                    by_session[session_id].append(event_id)
                return by_session

        wait_for(lambda: sum(map(len, stored().values())) >= EVENTS, 90, "every event stored", interval=0.5)
        assert stored() == published
        assert deployment.dead_letters() == []
    finally:
        deployment.close()
        admin(f'DROP DATABASE IF EXISTS "{staging}" WITH (FORCE)')
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
