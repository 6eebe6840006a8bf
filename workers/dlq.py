"""The dead-letter queue: where poison messages and exhausted tasks wait for an operator.

A dead letter is a JSON message on `<prefix>.dead` that says why it is there and carries what is
needed to send the work again: the task and its arguments (for ingest: the rejected events
only, the rest of their batch having been stored), or the raw bytes of a message nobody could
read. RabbitMQ may also dead-letter a rejected message itself (the queues' `x-dead-letter-exchange`);
such a message arrives unchanged with an `x-death` header, and is listed and replayed the same way.
`sessionledger dlq list` peeks without removing; `sessionledger dlq replay` sends each one back to
its queue (with a publisher confirm) and only then removes it. A replayed event is stored only if
that keeps its session in publish order (`replay_refusal`); otherwise it comes back here, saying so.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery
from kombu import Connection, Producer
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.json_text import read_json
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.queue_names import EVALUATE_TASK, INGEST_TASK, QueueNames, partition_of
from sessionledger.infrastructure.wire import session_of_line, task_message
from sessionledger.workers import metrics
from sessionledger.workers.broker_queues import queue_depth
from sessionledger.workers.metrics import log_event

log = logging.getLogger(__name__)

REPLAY_HEADER = "sl_replay"
"""The header of a message `replay_dead` sent (the dead letter's id): ingest checks such events
against their sessions (`replay_refusal`), so that a replay keeps publish order."""


@dataclass(frozen=True)
class DeadLetter:
    """Why a piece of work was given up, and enough to replay it."""

    reason: str
    queue: str
    task: str | None = None
    args: list[Any] | None = None
    kwargs: dict[str, Any] | None = None
    session_ids: list[str] = field(default_factory=list)
    raw_body: str | None = None  # base64, for a message that could not be read
    raw_headers: dict[str, Any] | None = None
    content_type: str | None = None
    dead_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @classmethod
    def of_task(
        cls, task: str, args: list[Any], kwargs: dict[str, Any], queue: str, reason: str
    ) -> DeadLetter:
        sessions = [args[0]] if args and isinstance(args[0], str) else []
        return cls(reason, queue, task, list(args), dict(kwargs), sessions)

    @classmethod
    def of_events(cls, lines: list[str], queue: str, reason: str, session_ids: list[str]) -> DeadLetter:
        """Events of an ingest batch rejected on their own (the rest of the batch was stored)."""
        return cls(reason, queue, INGEST_TASK, [lines], {}, sorted(set(session_ids)))

    @classmethod
    def of_raw_message(cls, message: Any, reason: str) -> DeadLetter:
        body = message.body if isinstance(message.body, bytes) else str(message.body).encode()
        return cls(
            reason,
            message.delivery_info.get("routing_key") or "",
            (message.headers or {}).get("task"),
            raw_body=base64.b64encode(body).decode(),
            raw_headers=_plain(message.headers or {}),
            content_type=message.content_type,
        )

    @classmethod
    def of_broker_message(cls, message: Any) -> DeadLetter:
        """A message read back from the dead-letter queue: ours, or one RabbitMQ dead-lettered."""
        deaths = (message.headers or {}).get("x-death")
        if not deaths:
            return cls(**read_json(message.body))
        death = deaths[0]
        dead = cls.of_raw_message(message, f"{death.get('reason', 'rejected')} by the broker")
        headers = {k: v for k, v in (dead.raw_headers or {}).items() if not k.startswith("x-")}
        return cls(**{**asdict(dead), "queue": death.get("queue", ""), "raw_headers": headers})

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), ensure_ascii=False, default=str).encode()

    def summary(self) -> dict[str, Any]:
        """What `sessionledger dlq list` shows."""
        events = len(self.args[0]) if self.task == INGEST_TASK and self.args else None
        return {
            "id": self.id,
            "dead_at": self.dead_at,
            "reason": self.reason,
            "queue": self.queue,
            "task": self.task,
            "sessions": self.session_ids,
            "events": events,
            "replayable": self.task is not None or self.raw_body is not None,
        }


class DeadLetterSender:
    """Publishes dead letters with the application's (confirming) connections; counts and logs them."""

    def __init__(self, celery: Celery, names: QueueNames) -> None:
        self._celery = celery
        self._names = names

    def send(self, letter: DeadLetter) -> None:
        with self._celery.producer_or_acquire() as producer:
            _publish_dead(producer, self._names, letter)
        metrics_of(self._celery).add(metrics.DEAD_LETTERED)
        log_event(
            log,
            "dead-lettered",
            logging.WARNING,
            reason=letter.reason,
            task=letter.task,
            queue=letter.queue,
            session_ids=letter.session_ids,
            dead_letter_id=letter.id,
        )


def dead_letters(celery: Celery) -> DeadLetterSender:
    from sessionledger.workers.app import settings_of

    return DeadLetterSender(celery, settings_of(celery).queue_names)


def metrics_of(celery: Celery) -> metrics.Metrics:
    from sessionledger.workers.runtime import runtime_of

    return runtime_of(celery).metrics


def _publish_dead(producer: Producer, names: QueueNames, letter: DeadLetter) -> None:
    producer.publish(
        letter.to_json(),
        exchange=names.dead_exchange,
        routing_key=names.dead,
        declare=[names.dead_queue],
        content_type="application/json",
        content_encoding="utf-8",
        delivery_mode=2,
        retry=True,
    )


def route_of(task: str, names: QueueNames) -> str:
    return names.evaluate if task == EVALUATE_TASK else names.compact


# --- the operator's side -------------------------------------------------------------------------


@contextmanager
def _dead_queue(broker_url: str, names: QueueNames) -> Iterator[tuple[Connection, Any | None]]:
    """A connection and the dead-letter queue on it, or None when the broker holds no such queue
    (nothing was ever dead-lettered under that prefix): it is not declared, so that looking at a
    mistyped prefix creates nothing."""
    with Connection(broker_url, transport_options={"confirm_publish": True}) as connection:
        if queue_depth(connection, names.dead_queue) is None:
            yield connection, None
        else:
            yield connection, names.dead_queue(connection.channel())


def dead_queue_exists(broker_url: str, names: QueueNames) -> bool:
    """Whether the broker holds the dead-letter queue of those names (asked without creating it)."""
    with Connection(broker_url) as connection:
        return queue_depth(connection, names.dead_queue) is not None


def list_dead(broker_url: str, names: QueueNames, limit: int = 100) -> list[DeadLetter]:
    """Up to `limit` dead letters, oldest first, left in the queue (none when there is no queue)."""
    letters, held = [], []
    with _dead_queue(broker_url, names) as (_connection, queue):
        if queue is None:
            return []
        for _ in range(limit):
            message = queue.get(no_ack=False)
            if message is None:
                break
            held.append(message)
            letters.append(DeadLetter.of_broker_message(message))
        for message in held:
            message.requeue()
    return letters


def replay_dead(broker_url: str, names: QueueNames, limit: int | None = None) -> int:
    """Send dead letters back to their queues, oldest first; returns how many were replayed.

    Each is removed only after the broker confirmed its replay. Dead letters with nothing to
    replay (no task, no raw body) stay where they are.
    """
    replayed, kept = 0, []
    with _dead_queue(broker_url, names) as (connection, queue):
        if queue is None:
            return 0
        channel = connection.channel()
        for target in names.all_queues():
            target(channel).declare()
        producer = Producer(channel, exchange=names.exchange, auto_declare=False)
        while limit is None or replayed < limit:
            message = queue.get(no_ack=False)
            if message is None:
                break
            if _replay(producer, names, DeadLetter.of_broker_message(message)):
                message.ack()
                replayed += 1
            else:
                kept.append(message)
        for message in kept:
            message.requeue()
    if kept:
        log.warning("%d dead letters had nothing to replay and were kept", len(kept))
    return replayed


def _replay(producer: Producer, names: QueueNames, letter: DeadLetter) -> bool:
    if letter.raw_body is not None:
        producer.publish(
            base64.b64decode(letter.raw_body),
            exchange=names.exchange,
            routing_key=letter.queue,
            headers={**(letter.raw_headers or {}), REPLAY_HEADER: letter.id},
            content_type=letter.content_type or "application/json",
            content_encoding="utf-8",
            delivery_mode=2,
        )
        return True
    if letter.task is None or letter.args is None:
        return False
    if letter.task == INGEST_TASK:
        for queue, lines in _ingest_routes(letter.args[0], names).items():
            _publish_task(producer, names, queue, INGEST_TASK, [lines], {}, letter.id)
        return True
    route = route_of(letter.task, names)
    _publish_task(producer, names, route, letter.task, letter.args, letter.kwargs or {}, letter.id)
    return True


def replay_refusal(service: SessionService, event: SessionEvent) -> str | None:
    """Why a replayed event stays dead-lettered, or `None`: it may be stored.

    A replay never puts a session's events out of publish order: an event is refused while its
    session holds an event (a summary aside) with a later timestamp, unless the event itself is
    already stored (storing it again changes nothing).
    """
    later = EventFilter(start=event.timestamp + timedelta(microseconds=1), exclude_synthetic=True, last_n=1)
    if not service.get_events(event.session_id, later):
        return None
    same_moment = EventFilter(start=event.timestamp, end=event.timestamp)
    if any(stored.id == event.id for stored in service.get_events(event.session_id, same_moment)):
        return None
    return (
        "replay refused: its session already holds events published after it, "
        "and storing it now would break the session's order"
    )


def _ingest_routes(lines: list[str], names: QueueNames) -> dict[str, list[str]]:
    """The partition queue of each event line (recomputed: the partition count may have changed)."""
    routes: dict[str, list[str]] = {}
    for line in lines:
        session_id = session_of_line(line)
        # a line naming no session is still malformed: it will come back here, with its reason
        queue = names.ingest(0 if session_id is None else partition_of(session_id, names.partitions))
        routes.setdefault(queue, []).append(line)
    return routes


def _publish_task(
    producer: Producer,
    names: QueueNames,
    queue: str,
    task: str,
    args: list[Any],
    kwargs: dict[str, Any],
    letter_id: str,
) -> None:
    headers, body = task_message(task, args, kwargs, **{REPLAY_HEADER: letter_id})
    producer.publish(
        body,
        exchange=names.exchange,
        routing_key=queue,
        headers=headers,
        content_type="application/json",
        content_encoding="utf-8",
        delivery_mode=2,
    )


def _plain(value: Any) -> Any:
    """Broker headers as JSON values (AMQP tables may hold bytes or datetimes)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
