"""`EventPublisher`: fire-and-forget publishing of session events, for agents.

`publish()` only appends to an in-process buffer: no network, no database, no encoding. A
background thread takes what accumulated, groups it by ingest partition, and sends one broker
message per partition and flush (a Celery `sessionledger.ingest` task whose argument is the list of
encoded events), waiting for the broker's confirm before dropping anything from memory. While the
broker is unreachable the events wait and the thread retries with backoff; when the bound is hit,
`publish()` raises `PublisherFull` rather than dropping silently. A message whose confirm is lost is
sent again: delivery is at-least-once and the ledger's event-id key makes it exactly-once.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kombu import Connection, Producer
from sessionledger.domain.codec import ensure_json, event_from_payload, event_to_payload
from sessionledger.domain.events import SessionEvent
from sessionledger.infrastructure.queue_names import INGEST_TASK, partition_of
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.settings import Settings

log = logging.getLogger(__name__)

_CELERY_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
_ORIGIN = f"publisher@{socket.gethostname()}:{os.getpid()}"


class PublisherFull(RuntimeError):
    """The publisher's buffer is at its bound (the broker is down or too slow); the event was not taken."""


class PublisherClosed(RuntimeError):
    """`publish()` after `close()`."""


def encode_event(event: SessionEvent) -> str:
    """One event as it travels to the ingest workers: a JSON document of its own.

    Each event is its own document so that one malformed event is rejected alone.
    """
    return json.dumps(
        {"id": event.id, "session_id": event.session_id, "event": event_to_payload(event)},
        separators=(",", ":"),
        ensure_ascii=False,
    )


class UndecodableEvent(ValueError):
    """A line that `decode_event` could not turn into an event; `session_id` if the line names one."""

    def __init__(self, reason: str, session_id: str | None) -> None:
        super().__init__(reason)
        self.session_id = session_id


def decode_event(line: str) -> SessionEvent:
    """The event `encode_event` encoded, validated as anything from outside the process is.

    Raises `UndecodableEvent` saying why (malformed JSON, or an invalid event) and carrying the
    session id the line names, if any, so that a rejected event can still be traced to its session.
    """
    try:
        document = json.loads(line)
    except ValueError as error:
        raise UndecodableEvent(f"malformed JSON: {error}", None) from error
    session_id = document.get("session_id") if isinstance(document, dict) else None
    session_id = session_id if isinstance(session_id, str) else None
    try:
        if not isinstance(document, dict):
            raise ValueError("an event must be a JSON object")
        return event_from_payload(
            str(document["session_id"]), str(document["id"]), document["event"], validate=True
        )
    except (KeyError, TypeError, ValueError) as error:
        raise UndecodableEvent(f"invalid event: {error}", session_id) from error


def session_of_line(line: str) -> str | None:
    """The session an encoded event belongs to, if its line names one (valid event or not)."""
    try:
        return decode_event(line).session_id
    except UndecodableEvent as error:
        return error.session_id


def task_message(
    task: str, args: list[Any], kwargs: dict[str, Any] | None = None, **headers: Any
) -> tuple[dict[str, Any], bytes]:
    """Headers and JSON body of a Celery (protocol 2) task message, built without a Celery app."""
    task_id = str(uuid.uuid4())
    base = {
        "lang": "py",
        "task": task,
        "id": task_id,
        "root_id": task_id,
        "parent_id": None,
        "group": None,
        "retries": 0,
        "eta": None,
        "expires": None,
        "timelimit": [None, None],
        "argsrepr": f"<{len(args[0]) if args and isinstance(args[0], list) else len(args)} items>",
        "kwargsrepr": "{}",
        "origin": _ORIGIN,
        "ignore_result": True,
    }
    body = json.dumps([args, kwargs or {}, _CELERY_EMBED], separators=(",", ":"), ensure_ascii=False)
    return {**base, **headers}, body.encode()


@dataclass(slots=True)
class _Outgoing:
    """One broker message not yet confirmed, and how many published events it carries."""

    routing_key: str
    headers: dict[str, Any]
    body: bytes
    events: int


class EventPublisher:
    """Publishes `SessionEvent`s to the ingest queues without blocking the caller.

    Options: `queue_prefix`, `partitions` (must match the workers'; by default the settings', i.e.
    `SESSIONLEDGER_QUEUE_PREFIX` / `SESSIONLEDGER_PARTITIONS`), `max_buffered` (events held in
    memory before `publish` raises), `flush_interval` (seconds an event may wait to be batched),
    `max_batch_events` / `max_batch_bytes` (per broker message), `confirm_timeout`, `max_backoff`.
    Thread-safe: any number of threads may publish; each thread's events for a session keep their order.
    """

    def __init__(
        self,
        broker_url: str,
        *,
        queue_prefix: str | None = None,
        partitions: int | None = None,
        max_buffered: int = 100_000,
        flush_interval: float = 0.05,
        max_batch_events: int = 2_000,
        max_batch_bytes: int = 4 * 1024 * 1024,
        confirm_timeout: float = 10.0,
        max_backoff: float = 2.0,
    ) -> None:
        if not broker_url:
            raise ValueError("broker_url is required")
        if max_buffered < 1 or max_batch_events < 1 or max_batch_bytes < 1:
            raise ValueError("max_buffered, max_batch_events and max_batch_bytes must be positive")
        if flush_interval <= 0:
            raise ValueError("flush_interval must be positive")
        self.broker_url = broker_url
        given = {"queue_prefix": queue_prefix, "partitions": partitions}
        self.names = Settings(
            **{name: value for name, value in given.items() if value is not None}
        ).queue_names
        self.max_buffered = max_buffered
        self._flush_interval = flush_interval
        self._max_batch_events = max_batch_events
        self._max_batch_bytes = max_batch_bytes
        self._confirm_timeout = confirm_timeout
        self._max_backoff = max_backoff

        self._buffer: deque[SessionEvent] = deque()
        self._lock = threading.Lock()  # guards the bound and the counters below
        self._in_flight = 0  # taken from the buffer, not yet confirmed
        self._published = 0  # accepted by publish()
        self._settled = 0  # confirmed by the broker, or dropped as unencodable (counted in `rejected`)
        self.rejected = 0
        self.messages_sent = 0
        self.send_failures = 0
        self._progress = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._stopping = False
        self._closed = False
        self._connection: Connection | None = None
        self._producer: Producer | None = None
        self._thread = threading.Thread(target=self._run, name="sessionledger-publisher", daemon=True)
        self._thread.start()
        _live_publishers.add(self)

    # the agent's side
    def publish(self, event: SessionEvent) -> None:
        """Take the event for delivery; never waits for the network or the database.

        `ValueError` for an event that cannot be encoded, `PublisherFull` at the bound,
        `PublisherClosed` after `close()`.
        """
        if not isinstance(event, SessionEvent):
            raise ValueError(f"expected a SessionEvent, got {type(event).__name__}")
        if event.metadata:
            ensure_json(event.metadata, "metadata")
        if event.state_delta:
            ensure_json(event.state_delta, "state_delta")
        if event.message.metadata:
            ensure_json(event.message.metadata, "message metadata")
        with self._lock:
            if self._closed:
                raise PublisherClosed("publish() after close()")
            held = len(self._buffer) + self._in_flight
            if held >= self.max_buffered:
                raise PublisherFull(
                    f"{held} events are waiting for the broker at {self._safe_url()} "
                    f"(max_buffered={self.max_buffered}); the event was not published"
                )
            self._buffer.append(event)
            self._published += 1
            if len(self._buffer) == self._max_batch_events:
                self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event published before this call is confirmed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._progress:
            target = self._published
            self._wake.set()
            while self._settled < target:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._progress.wait(remaining)
        return True

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered, then stop; `TimeoutError` (naming the count) if that did not finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        delivered = self.flush(timeout)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=5)
        self._disconnect()
        _live_publishers.discard(self)
        if not delivered:
            raise TimeoutError(f"{self.pending} published events were not delivered to {self._safe_url()}")

    def __enter__(self) -> EventPublisher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
        return self._settled - self.rejected

    # the background thread
    def _run(self) -> None:
        outgoing: list[_Outgoing] = []
        taken = 0  # events of the batch in `outgoing` (settled together, so `flush` sees a FIFO prefix)
        backoff = 0.0
        while not self._stopping:
            self._wake.wait(backoff or self._flush_interval)
            self._wake.clear()
            if not outgoing:
                outgoing, taken = self._take()
                if not outgoing:
                    if taken:
                        self._settle(taken)
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
        batch: list[SessionEvent] = []
        limit = self._max_batch_events * self.names.partitions
        popleft = self._buffer.popleft
        with self._lock:
            while self._buffer and len(batch) < limit:
                batch.append(popleft())
            self._in_flight += len(batch)
        by_partition: dict[int, list[str]] = {}
        partitions = self.names.partitions
        for event in batch:
            try:
                line = encode_event(event)
            except Exception as error:  # publish() checked it; dropping it here is logged and counted
                self.rejected += 1
                log.error("event %s of %s cannot be encoded, not sent: %s", event.id, event.session_id, error)
                continue
            by_partition.setdefault(partition_of(event.session_id, partitions), []).append(line)
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
        except TimeoutError as error:
            log.error("at exit: %s", error)
