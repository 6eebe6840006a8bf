"""`EventPublisher`: fire-and-forget publishing of session events, for agents.

`publish()` checks and encodes the event as an append does (`append_draft`: what the ledger would
refuse is refused here, in the same words) and appends its encoded line to an in-process buffer: no
network, no database. The lines and the broker messages are written in the format `wire.py`
defines, which the workers read. A background thread takes what accumulated, groups it by ingest partition,
and sends one broker message per partition and flush (a Celery `sessionledger.ingest` task whose
argument is the list of lines), waiting for the broker's confirm before dropping anything from
memory. The thread only moves lines that are known to be good, so no single event can stop it; if it
stops anyway, every later `publish()` and `flush()` raises `PublisherBroken` with the cause. While
the broker is unreachable the lines wait and the thread retries with backoff; when the bound is hit,
`publish()` raises `PublisherFull` rather than dropping silently. A message whose confirm is lost is
sent again: delivery is at-least-once and the ledger's event-id key makes it exactly-once. `close()`
waits a bounded time and says how many events it could not deliver.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kombu import Connection, Producer
from kombu.utils.url import parse_url
from sessionledger.domain.events import SessionEvent
from sessionledger.infrastructure.forks import forget_in_children
from sessionledger.infrastructure.queue_names import INGEST_TASK, partition_of
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.service import append_draft
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.tracing import PUBLISH, Span, SpanKind, carrier_of, traced
from sessionledger.infrastructure.wire import PublisherIdentity, event_line, task_message

log = logging.getLogger(__name__)


class PublisherFull(RuntimeError):
    """The publisher's buffer is at its bound (the broker is down or too slow); the event was not taken."""


class PublisherClosed(RuntimeError):
    """`publish()` after `close()`."""


class PublisherBroken(RuntimeError):
    """The delivery thread stopped on an unexpected error (the `__cause__`); nothing more is taken."""


class UndeliveredEvents(TimeoutError):
    """`close()` ran out of time: `count` published events were not confirmed by the broker (lost)."""

    def __init__(self, count: int, message: str) -> None:
        super().__init__(message)
        self.count = count


_MESSAGING_SYSTEMS = {
    "amqp": "rabbitmq",
    "pyamqp": "rabbitmq",
    "amqps": "rabbitmq",
    "redis": "redis",
    "rediss": "redis",
}
"""OpenTelemetry's `messaging.system` for a broker URL's scheme (kombu's other transports: "kombu")."""

_URL_EXAMPLES = "e.g. amqp://user:password@host:5672// or redis://host:6379/0"

BROKER_SCHEMES = frozenset({"amqp", "amqps", "pyamqp", "redis", "rediss", "memory"})
"""The kombu transports the queue is built and tested on (RabbitMQ, Redis, in-process): kombu
knows many more (SQS, Kafka, a database), which would start and then fail in their own ways."""


def checked_broker_url(url: object) -> str:
    """`url` if it names a broker transport kombu knows, else a one-line `ValueError` (password masked)."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"broker_url is required, {_URL_EXAMPLES}")
    scheme, separator, _ = url.partition("://")
    if not separator:
        # not echoed: without a scheme, nothing tells a password in it from the rest
        raise ValueError(f"the broker URL is not a URL (no scheme://): expected {_URL_EXAMPLES}")
    if scheme not in BROKER_SCHEMES:
        raise ValueError(
            f"broker URL {hide_passwords(url)!r} has an unsupported scheme {scheme!r}: "
            "use amqp:// (RabbitMQ), redis:// or memory:// (in-process)"
        )
    try:
        parse_url(url)  # as kombu will read it: a port that is not a number, a password given twice
    except ValueError as error:
        raise ValueError(f"broker URL {hide_passwords(url)!r} is not valid: {error}") from None
    except TypeError:  # its own settings and the query's, passed as one call's arguments
        raise ValueError(
            f"broker URL {hide_passwords(url)!r} is not valid: give the user and password before the "
            "host (scheme://user:password@host), not in the query string"
        ) from None
    return url


@dataclass(slots=True)
class _Outgoing:
    """One broker message not yet confirmed, and how many published events it carries."""

    routing_key: str
    headers: dict[str, Any]
    body: bytes
    events: int


class EventPublisher:
    """Publishes `SessionEvent`s to the ingest queues without blocking the caller.

    `broker_url` is checked at once (`ValueError` naming what is wrong, password masked); nothing
    connects before the first send. Options: `queue_prefix`, `partitions`, `queue_type` (must match the
    workers'), `max_payload_bytes` (must match the ledger's: larger events are refused at `publish`),
    by default the settings' (`SESSIONLEDGER_QUEUE_PREFIX`, `_PARTITIONS`, `_QUEUE_TYPE`,
    `_MAX_PAYLOAD_BYTES`); `max_buffered`
    (events held in memory before `publish` raises), `flush_interval` (seconds an event may wait to
    be batched), `max_batch_events` / `max_batch_bytes` (per broker message), `confirm_timeout`,
    `max_backoff`, `close_timeout` (seconds `close()`, and so the end of a `with` block, waits for
    the broker). Thread-safe: any number of threads may publish; each thread's events for a session
    keep their order.

    `user_id` / `app_name` bind the publisher to an identity, stamped on every event it sends:
    the ingest workers then store its events only in sessions of that user (and/or app) and
    dead-letter the others with the reason. The identity is the publisher's word, not a proof:
    whoever can publish to the broker can write events (docs/production.md, "Isolation and the broker").
    """

    def __init__(
        self,
        broker_url: str,
        *,
        queue_prefix: str | None = None,
        partitions: int | None = None,
        queue_type: str | None = None,
        max_payload_bytes: int | None = None,
        max_buffered: int = 100_000,
        flush_interval: float = 0.05,
        max_batch_events: int = 2_000,
        max_batch_bytes: int = 4 * 1024 * 1024,
        confirm_timeout: float = 10.0,
        max_backoff: float = 2.0,
        close_timeout: float = 30.0,
        user_id: str | None = None,
        app_name: str | None = None,
    ) -> None:
        self.identity = PublisherIdentity(user_id, app_name)
        if max_buffered < 1 or max_batch_events < 1 or max_batch_bytes < 1:
            raise ValueError("max_buffered, max_batch_events and max_batch_bytes must be positive")
        if flush_interval <= 0 or close_timeout <= 0:
            raise ValueError("flush_interval and close_timeout must be positive")
        self.broker_url = checked_broker_url(broker_url)
        given: dict[str, Any] = {
            "queue_prefix": queue_prefix,
            "partitions": partitions,
            "queue_type": queue_type,
            "max_payload_bytes": max_payload_bytes,
        }
        settings = Settings(**{name: value for name, value in given.items() if value is not None})
        self.names = settings.queue_names
        self.max_payload_bytes = settings.max_payload_bytes
        self.max_buffered = max_buffered
        self._flush_interval = flush_interval
        self._max_batch_events = max_batch_events
        self._max_batch_bytes = max_batch_bytes
        self._confirm_timeout = confirm_timeout
        self._max_backoff = max_backoff
        self.close_timeout = close_timeout

        self._stopping = False
        self._closed = False
        self._failure: BaseException | None = None  # why the delivery thread stopped, if it did
        self._nothing_taken()
        self._thread = self._started()
        _live_publishers.add(self)
        forget_in_children(self, EventPublisher._forget_parent)

    def _nothing_taken(self) -> None:
        """An empty buffer, no broker connection, counters at zero."""
        self._buffer: deque[tuple[int, str]] = deque()  # (partition, line), in publish order
        self._lock = threading.Lock()  # guards the bound and the counters below
        self._in_flight = 0  # taken from the buffer, not yet confirmed
        self._published = 0  # accepted by publish()
        self._settled = 0  # confirmed by the broker
        self.messages_sent = 0
        self.send_failures = 0
        self._progress = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._connection: Connection | None = None
        self._producer: Producer | None = None

    def _started(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="sessionledger-publisher", daemon=True)
        thread.start()
        return thread

    def _forget_parent(self) -> None:
        """In a forked child, where the delivery thread did not follow: the parent delivers what it
        had buffered, and this process publishes through a thread and a broker connection of its
        own (the parent's connection is neither used nor closed here)."""
        self._nothing_taken()
        if not self._closed and self._failure is None:
            self._thread = self._started()

    # the agent's side
    def publish(self, event: SessionEvent) -> None:
        """Take the event for delivery; never waits for the network or the database.

        `ValueError` for an event the ledger would refuse (the checks and words of
        `SessionService.append_event`, the payload limit included), `PublisherFull` at the bound,
        `PublisherClosed` after `close()`, `PublisherBroken` once the delivery thread has stopped.
        """
        traced(PUBLISH, lambda span: self._publish(event, span), SpanKind.PRODUCER)

    def _publish(self, event: SessionEvent, span: Span) -> None:
        if span.is_recording():
            span.set_attributes(self._span_attributes(event))
        text = append_draft(event, self.max_payload_bytes).text
        self._take_line(event, event_line(event, text, self.identity, carrier_of(span)))

    def _span_attributes(self, event: SessionEvent) -> dict[str, str]:
        """What a `publish()` span says: whose event, for which session; never its text."""
        named = {
            "sessionledger.session_id": event.session_id,
            "sessionledger.event_id": event.id,
            "messaging.system": _MESSAGING_SYSTEMS.get(self.broker_url.partition(":")[0], "kombu"),
            "messaging.destination.name": self.names.ingest(
                partition_of(event.session_id, self.names.partitions)
            ),
        }
        return named | {f"sessionledger.{key}": value for key, value in self.identity.as_dict().items()}

    def _take_line(self, event: SessionEvent, line: str) -> None:
        partition = partition_of(event.session_id, self.names.partitions)
        with self._lock:
            if self._closed:
                raise PublisherClosed("publish() after close()")
            self._raise_if_broken()
            held = len(self._buffer) + self._in_flight
            if held >= self.max_buffered:
                raise PublisherFull(
                    f"{held} events are waiting for the broker at {self._safe_url()} "
                    f"(max_buffered={self.max_buffered}); the event was not published"
                )
            self._buffer.append((partition, line))
            self._published += 1
            if len(self._buffer) == self._max_batch_events:
                self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event published before this call is confirmed; False on timeout.

        `PublisherBroken` if the delivery thread stopped before that.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._progress:
            target = self._published
            self._wake.set()
            while self._settled < target:
                self._raise_if_broken()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._progress.wait(remaining)
        return True

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered, waiting at most `timeout` seconds (by default `close_timeout`,
        30 s), then stop; `flush()` first to wait as long as it takes.

        What could not be delivered in time is lost with the publisher: a warning names the count,
        and `UndeliveredEvents` (a `TimeoutError` carrying `count`) is raised; `PublisherBroken`
        if the delivery thread had stopped. A second `close()` does nothing.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        timeout = self.close_timeout if timeout is None else timeout
        try:
            delivered = self.flush(timeout)
        finally:
            self._stopping = True
            self._wake.set()
            self._thread.join(timeout=5)  # it closes its connection on its way out
            _live_publishers.discard(self)
        if not delivered:
            lost = self.pending
            message = (
                f"{lost} published events were not delivered to {self._safe_url()}: "
                f"the broker did not confirm them within {timeout}s"
            )
            log.warning("%s", message)
            raise UndeliveredEvents(lost, message)

    def __enter__(self) -> EventPublisher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        """`close()`; while an exception is already on its way out, a failed close is only logged
        (by `close` itself), so that it does not hide that exception."""
        try:
            self.close()
        except (UndeliveredEvents, PublisherBroken):
            if exc_type is None:
                raise

    @property
    def pending(self) -> int:
        """Events published but not yet confirmed by the broker."""
        return self._published - self._settled

    @property
    def published(self) -> int:
        return self._published

    @property
    def delivered(self) -> int:
        """Events the broker confirmed."""
        return self._settled

    def _raise_if_broken(self) -> None:
        if self._failure is not None:
            raise PublisherBroken(
                f"the publisher's delivery thread stopped ({self._failure!r}); "
                f"{self.pending} published events were not delivered"
            ) from self._failure

    # the background thread
    def _run(self) -> None:
        try:
            self._deliver()
        except BaseException as error:  # a bug, or worse: say so at every later call, never go quiet
            log.critical("the publisher's delivery thread stopped; publish() now raises", exc_info=True)
            with self._progress:
                self._failure = error
                self._progress.notify_all()
        finally:
            self._disconnect()

    def _deliver(self) -> None:
        outgoing: list[_Outgoing] = []
        taken = 0  # events of the batch in `outgoing` (settled together, so `flush` sees a FIFO prefix)
        backoff = 0.0
        while not self._stopping:
            self._wake.wait(backoff or self._flush_interval)
            self._wake.clear()
            if not outgoing:
                outgoing, taken = self._take()
                if not outgoing:
                    continue
            try:
                self._send(outgoing)
            except Exception as error:  # any failure: keep the events and retry
                self.send_failures += 1
                backoff = min(self._max_backoff, max(0.05, backoff * 2))
                log.warning(
                    "broker unavailable, %d events kept for retry in %.2fs: %r", taken, backoff, error
                )
                self._disconnect()
                continue
            backoff = 0.0
            self._settle(taken)
            taken = 0
            if len(self._buffer) >= self._max_batch_events:
                self._wake.set()  # a full batch is already waiting: no pause

    def _take(self) -> tuple[list[_Outgoing], int]:
        """Move what the buffer holds into broker messages, one run per partition, in publish order."""
        batch: list[tuple[int, str]] = []
        limit = self._max_batch_events * self.names.partitions
        popleft = self._buffer.popleft
        with self._lock:
            while self._buffer and len(batch) < limit:
                batch.append(popleft())
            self._in_flight += len(batch)
        by_partition: dict[int, list[str]] = {}
        for partition, line in batch:
            by_partition.setdefault(partition, []).append(line)
        messages = [m for p, lines in sorted(by_partition.items()) for m in self._messages(p, lines)]
        return messages, len(batch)

    def _messages(self, partition: int, lines: list[str]) -> Iterator[_Outgoing]:
        routing_key = self.names.ingest(partition)
        for chunk in _chunks(lines, self._max_batch_events, self._max_batch_bytes):
            headers, body = task_message(INGEST_TASK, [chunk], sl_events=len(chunk))
            yield _Outgoing(routing_key, headers, body, len(chunk))

    def _send(self, outgoing: list[_Outgoing]) -> None:
        """Publish each message and wait for its confirm; confirmed ones leave `outgoing` at once."""
        producer = self._ensure_producer()
        while outgoing:
            message = outgoing[0]
            producer.publish(
                message.body,
                routing_key=message.routing_key,
                exchange=self.names.exchange,
                headers=message.headers,
                content_type="application/json",
                content_encoding="utf-8",
                delivery_mode=2,
                correlation_id=message.headers["id"],
                timeout=self._confirm_timeout,
                confirm_timeout=self._confirm_timeout,
            )
            outgoing.pop(0)
            self.messages_sent += 1

    def _settle(self, events: int) -> None:
        with self._progress:
            self._in_flight -= events
            self._settled += events
            self._progress.notify_all()

    def _ensure_producer(self) -> Producer:
        if self._producer is None:
            connection = Connection(
                self.broker_url,
                connect_timeout=self._confirm_timeout,
                transport_options={
                    "confirm_publish": True,
                    "socket_timeout": self._confirm_timeout,
                    "socket_connect_timeout": self._confirm_timeout,
                },
            )
            try:
                connection.ensure_connection(max_retries=0)  # no sleeping here: `_run` backs off
                channel = connection.channel()
                for queue in self.names.ingest_queues():
                    queue.bind(channel).declare()
            except BaseException:
                connection.release()
                raise
            self._connection = connection
            self._producer = Producer(channel, exchange=self.names.exchange, auto_declare=False)
        return self._producer

    def _disconnect(self) -> None:
        connection, self._connection, self._producer = self._connection, None, None
        if connection is not None:
            try:
                connection.release()
            except Exception:  # the connection is being thrown away
                log.debug("ignoring an error while closing a broken connection", exc_info=True)

    def _safe_url(self) -> str:
        return hide_passwords(self.broker_url)


def _chunks(lines: list[str], max_events: int, max_bytes: int) -> Iterable[list[str]]:
    chunk: list[str] = []
    size = 0
    for line in lines:
        if chunk and (len(chunk) >= max_events or size + len(line) > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(line)
        size += len(line)
    if chunk:
        yield chunk


_live_publishers: weakref.WeakSet[EventPublisher] = weakref.WeakSet()


@atexit.register
def _deliver_at_exit() -> None:
    """A publisher left open at interpreter exit gets a few seconds to deliver, and says what it lost."""
    for publisher in list(_live_publishers):
        try:
            publisher.close(timeout=5)
        except (UndeliveredEvents, PublisherBroken) as error:
            log.error("at exit: %s", error)
