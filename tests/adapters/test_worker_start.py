"""What a worker says when it starts: on Redis, where per-session order does not hold."""

from __future__ import annotations

import logging
import uuid
from types import SimpleNamespace

from celery import signals
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import create_app


def warnings_at_start(caplog, broker_url: str, role: str) -> list[logging.LogRecord]:
    """The warnings a worker of that role logs once its queues are chosen (Celery's start-up signal)."""
    settings = Settings(
        broker_url=broker_url, queue_prefix=f"w{uuid.uuid4().hex[:8]}", redelivery_horizon=1300
    )
    celery = create_app(settings)
    names = settings.queue_names
    celery.amqp.queues.select(
        [queue.name for queue in names.ingest_queues()] if role == "ingest" else [names.compact]
    )
    with caplog.at_level(logging.WARNING):
        signals.celeryd_after_setup.send(
            sender="host", instance=SimpleNamespace(app=celery), conf=celery.conf
        )
    assert celery.conf.broker_transport_options["visibility_timeout"] == 1300
    return [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_an_ingest_worker_on_redis_and_only_it_says_that_order_does_not_survive_a_crash(caplog):
    for url in ("redis://127.0.0.1:6379/0", "rediss://cache.example:6380/1"):
        (warning,) = warnings_at_start(caplog, url, "ingest")
        assert "Redis does not keep per-session order across a worker crash" in warning.getMessage()
        assert warning.fields["visibility_timeout"] == 1300  # the setting that bounds the wait
        caplog.clear()
    assert warnings_at_start(caplog, "amqp://guest:guest@127.0.0.1:5672//", "ingest") == []
    assert warnings_at_start(caplog, "redis://127.0.0.1:6379/0", "tasks") == []
