"""The Celery application (`create_app(settings)`), configured for LLM work and for per-session order.

- Ingest (`sessionledger.ingest.<n>` queues) runs in workers started with `--role ingest`: a solo
  pool, one message at a time, so each partition's messages are stored in order; on RabbitMQ the
  partition queues have a single active consumer, so a second worker on a partition waits as a standby.
- Evaluate and compact run in `--role tasks` workers (prefork pool, any concurrency).
- Every task acks late (after its effect is committed), with a prefetch of 1. A pool process that
  dies mid-task has its task retried (bounded by `max_retries`, with backoff); a message the
  broker redelivers after a whole worker died counts as a retry too. Time limits stay below the
  broker's redelivery horizon (RabbitMQ `consumer_timeout`, 30 min by default; Redis
  `visibility_timeout`, set to the same horizon), so a slow task is never redelivered while running.
  After the last retry, a task goes to the dead-letter queue with its reason.
- On Redis, the batch of an ingest worker that crashed stays invisible until that horizon passes and
  is then stored after later events of its sessions: an ingest worker on Redis says so when it starts.
"""

from __future__ import annotations

import logging
import os
import threading
from functools import partial
from typing import Any

from celery import Celery, current_app, signals
from celery.worker.consumer import Consumer
from kombu import Connection, serialization
from kombu.utils import json as kombu_json
from sessionledger.infrastructure.publisher import checked_broker_url
from sessionledger.infrastructure.queue_names import COMPACT_TASK, EVALUATE_TASK, SWEEP_TASK
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.wire import read_json_body

log = logging.getLogger(__name__)


class DeadLetteringConsumer(Consumer):
    """Celery's consumer, except that unreadable or unknown messages go to the dead-letter queue.

    Celery acks an undecodable message and rejects an unknown one (dropped on Redis); here both
    are kept, with the reason, for an operator to inspect (`sessionledger dlq list`).
    """

    class Blueprint(Consumer.Blueprint):  # type: ignore[valid-type,misc]  # celery-types: an attribute, not a class
        """Celery's consumer steps without native delayed delivery, which Celery turns on for
        quorum queues: it declares 28 broker-wide `celery_delayed_*` queues and exchanges, and
        works only for queues bound to topic exchanges, not the direct one the ingest partitions
        are routed by. A retry's countdown is kept by the worker instead, as with classic queues
        (an ingest partition waits for its retried batch, which keeps its sessions in order)."""

        default_steps = tuple(
            step for step in Consumer.Blueprint.default_steps if not step.endswith(":DelayedDelivery")
        )

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        self._dead(message, f"undecodable message: {exc}")

    def on_unknown_message(self, body: Any, message: Any) -> None:
        self._dead(message, "not a task message")

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        self._dead(message, f"unknown task {message.headers.get('task')!r}")

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        self._dead(message, f"invalid task message: {exc}")

    def call_soon_ack(self, ack: Any, *args: Any, **kwargs: Any) -> Any:
        """Ack (or reject) a finished task's message at once when its task ended in the event
        loop's own thread (the solo pool's tasks; the prefork pool's results): Celery defers it
        to the loop's next turn, and when the task had run from a deferred callback that turn
        came only after the loop's poll had timed out. With acks_late and a prefetch of 1 the
        broker sends the next message only after that ack: ingest workers stood idle up to 2 s
        between messages. Any other thread defers, as Celery does."""
        if threading.current_thread() is not threading.main_thread():
            return super().call_soon_ack(ack, *args, **kwargs)  # type: ignore[misc]  # celery-types lacks it (Celery 5.4)
        bound = partial(ack, *args, **kwargs)
        bound()
        return bound

    def _dead(self, message: Any, reason: str) -> None:
        from sessionledger.workers.dlq import DeadLetter, dead_letters

        dead_letters(self.app).send(DeadLetter.of_raw_message(message, reason))
        message.ack()


def create_app(settings: Settings, *, index_text: bool = False) -> Celery:
    """The Celery application of those settings, built when a process starts (`sessionledger
    worker`, `relay`, the embedded pipeline); `ValueError` without a broker URL. `index_text`:
    its worker processes keep the keyword index up (`open_storage`'s), as an ingest worker does."""
    names = settings.queue_names
    # Celery reads each task message twice (its strategy, then the task's trace): the JSON of
    # an ingest batch is megabytes, which orjson reads four times as fast (`read_json_body`)
    serialization.register(
        "json", kombu_json.dumps, read_json_body, content_type="application/json", content_encoding="utf-8"
    )
    celery = Celery(
        "sessionledger", broker=required_broker(settings), include=["sessionledger.workers.tasks"]
    )
    celery.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_store_errors_even_if_ignored=False,
        task_acks_late=True,
        task_acks_on_failure_or_timeout=True,  # failures are dead-lettered first (workers.dlq)
        task_reject_on_worker_lost=True,
        task_retry_on_worker_lost=True,  # a lost pool process costs a retry, bounded by max_retries
        worker_prefetch_multiplier=1,
        worker_cancel_long_running_tasks_on_connection_loss=True,
        task_soft_time_limit=settings.task_soft_time_limit,
        task_time_limit=settings.task_time_limit,
        broker_transport_options={
            "confirm_publish": True,
            "visibility_timeout": settings.redelivery_horizon,
        },
        broker_connection_retry_on_startup=True,
        task_queues=[*names.ingest_queues(), names.evaluate_queue, names.compact_queue],
        task_default_exchange=names.prefix,
        task_default_queue=names.compact,
        task_default_routing_key=names.compact,
        task_routes={
            EVALUATE_TASK: {"queue": names.evaluate, "routing_key": names.evaluate},
            COMPACT_TASK: {"queue": names.compact, "routing_key": names.compact},
            SWEEP_TASK: {"queue": names.compact, "routing_key": names.compact},
        },
        task_create_missing_queues=False,
        # a task whose pool process died runs again after this delay (Celery's default: 3 minutes),
        # at most max_retries times (Celery's default: 3), like every other retry
        task_annotations={
            "*": {"default_retry_delay": settings.retry_backoff, "max_retries": settings.max_retries}
        },
        worker_consumer="sessionledger.workers.app:DeadLetteringConsumer",
    )
    celery.sessionledger_settings = settings  # type: ignore[attr-defined]  # ours, where tasks find them
    celery.sessionledger_index_text = index_text  # type: ignore[attr-defined]  # ours, as the settings
    return celery


def required_broker(settings: Settings) -> str:
    """The broker URL: the library runs without one (no queue), a worker or relay cannot."""
    if settings.broker_url is None:
        raise ValueError("a worker needs a broker: set SESSIONLEDGER_BROKER_URL (amqp://... or redis://...)")
    return settings.broker_url


def check_broker(broker_url: str, timeout: float = 5.0) -> None:
    """Connect to the broker once, so that a process stops at start with the reason instead of
    retrying a broker that will never take it: `ValueError` for a URL no transport takes, else the
    transport's own error when the broker does not answer or refuses the login."""
    with Connection(checked_broker_url(broker_url), connect_timeout=timeout) as connection:
        connection.ensure_connection(max_retries=0)


REDIS_ORDER_CAVEAT = (
    "Redis does not keep per-session order across a worker crash: the batch of a crashed ingest "
    "worker comes back only after the visibility timeout and is then stored after later events "
    "of its sessions (so is a batch requeued after a database outage longer than the ingest "
    "patience); use RabbitMQ where that order matters"
)
"""What an ingest worker on Redis logs once at start, and `sessionledger stats` shows on Redis."""


def on_redis(settings: Settings) -> bool:
    return (settings.broker_url or "").startswith(("redis://", "rediss://", "sentinel://"))


@signals.celeryd_after_setup.connect
def _warn_about_order_on_redis(sender: str, instance: Any, **_: Any) -> None:
    """An ingest worker on Redis states, once at start, where per-session order does not hold."""
    settings = getattr(instance.app, "sessionledger_settings", None)
    if settings is None or not on_redis(settings):
        return
    ingest = f"{settings.queue_prefix}.ingest."
    if not any(name.startswith(ingest) for name in instance.app.amqp.queues.consume_from):
        return
    from sessionledger.workers.metrics import log_event

    log_event(
        log,
        REDIS_ORDER_CAVEAT,
        logging.WARNING,
        visibility_timeout=settings.redelivery_horizon,
        ingest_patience=settings.ingest_patience,
    )


def settings_of(celery: Celery) -> Settings:
    """The settings the application was built from (`create_app`)."""
    settings: Settings = celery.sessionledger_settings  # type: ignore[attr-defined]  # set by create_app
    return settings


def indexes_text(celery: Celery) -> bool:
    """Whether the application's worker processes run the keyword indexer (`create_app`)."""
    index_text: bool = celery.sessionledger_index_text  # type: ignore[attr-defined]  # set by create_app
    return index_text


def worker_arguments(
    settings: Settings,
    role: str,
    *,
    partitions: list[int] | None = None,
    concurrency: int | None = None,
    loglevel: str = "INFO",
    process_id: int | None = None,
) -> list[str]:
    """The `celery worker` arguments of one role: `ingest` (solo, in order) or `tasks` (prefork).

    Node names say what a worker serves and which process it is (`ingest-0.1-<pid>@host`,
    `tasks-<pid>@host`): unique on a host, and predictable in a container, where the worker is
    process 1, so a health check can ping exactly it (`-d ingest-0.1-1@$HOSTNAME`).
    """
    names = settings.queue_names
    process_id = os.getpid() if process_id is None else process_id
    # JSON logs: no banner either (the "worker started" line says where it connected and what it consumes)
    quiet = ["--quiet"] if settings.log_format == "json" else []
    common = [*quiet, "worker", f"--loglevel={loglevel}", "--without-gossip", "--without-mingle"]
    if role == "ingest":
        chosen = list(range(names.partitions)) if partitions is None else partitions
        queues = ",".join(q.name for q in names.ingest_queues(chosen))
        node = f"ingest-{'.'.join(map(str, chosen))}-{process_id}"
        return [*common, "--pool=solo", f"--queues={queues}", f"--hostname={node}@%h"]
    if role == "tasks":
        extra = [f"--concurrency={concurrency}"] if concurrency else []
        queues = f"{names.evaluate},{names.compact}"
        return [*common, "--pool=prefork", *extra, f"--queues={queues}", f"--hostname=tasks-{process_id}@%h"]
    raise ValueError(f"unknown worker role {role!r}: use ingest or tasks")


@signals.worker_ready.connect
def _log_start(sender: Any = None, **_: Any) -> None:
    """Say in the worker's log that it started, where it connected (no password) and what it consumes."""
    settings = getattr(sender.app, "sessionledger_settings", None)
    if settings is None:
        return
    from sessionledger.workers.metrics import log_event

    log_event(
        logging.getLogger(__name__),
        "worker started",
        node=sender.hostname,
        broker=hide_passwords(settings.broker_url or ""),
        database=hide_passwords(settings.database_url),
        queues=sorted(sender.app.amqp.queues.consume_from),
    )


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _structured_logs(logger: logging.Logger, **_: Any) -> None:
    """JSON log lines, unless the worker's settings say `log_format=text` (Celery made its
    application current before it set up logging)."""
    settings = getattr(current_app, "sessionledger_settings", None)
    if settings is not None and settings.log_format == "json":
        from sessionledger.workers.metrics import use_json_logs

        use_json_logs(logger.handlers)


def __getattr__(name: str) -> Celery:
    """`app`: the application built from the environment on first use, for `celery -A
    sessionledger.workers.app` only; the `sessionledger` command and the worker launcher build
    theirs from the settings they were given."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    built = globals()["app"] = create_app(Settings())
    return built
