"""The embedded default: the production pipeline in one process, for `sessionledger demo`.

Same code, same path as production: an `EventPublisher` sends batches to the ingest queue, a
Celery worker runs the same `ingest`, `evaluate` and `compact` tasks, the same relay tails the
ledger. What differs, and why:

- the broker is kombu's in-memory transport (`memory://`): nothing to install, but messages in
  flight live in this process only (production: RabbitMQ or Redis, durable queues);
- one worker thread with a solo pool runs every task, one at a time (production: ingest workers
  per partition and a prefork pool for compactions), so a slow summarizer delays ingest here;
- one ingest partition, and no time limits (the solo pool cannot enforce them);
- the storage is the caller's: a SQLite file for the demo, or `memory://` with no database at all
  (production: PostgreSQL).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from celery.worker import state as worker_state
from kombu.transport.memory import Channel as MemoryChannel
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.bootstrap import Storage
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.workers.app import create_app
from sessionledger.workers.policy import PolicyBook
from sessionledger.workers.relay import EvaluateSender, Relay, relay_forever
from sessionledger.workers.runtime import WorkerRuntime, install_runtime

MEMORY_BROKER = "memory://localhost//"


class EmbeddedPipeline:
    """Publisher, worker and relay in this process, on one storage; a context manager.

    `storage` stays the caller's to close (its counters can be read after the pipeline stopped).
    The settings are the storage's (its ledger, summarizer, model, policies) with the queue knobs
    replaced by the embedded ones: the in-memory broker, one partition, a quick relay. `service` is
    the ledger's `SessionService`, `publisher` the agents' `EventPublisher`. `policies` overrides
    the configured compaction policies (e.g. a demo's own).
    """

    def __init__(
        self,
        storage: Storage,
        *,
        policies: PolicyBook | None = None,
        queue_prefix: str = "sessionledger-embedded",
        max_buffered: int = 100_000,
    ) -> None:
        self.storage = storage
        self.settings = storage.service.settings.model_copy(
            update={
                "broker_url": MEMORY_BROKER,
                "queue_prefix": queue_prefix,
                "partitions": 1,
                "relay_interval": 0.1,
                "retry_backoff": 1,
                "log_format": "text",
            }
        )
        self._policies = policies
        self._max_buffered = max_buffered
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.celery = create_app(self.settings)
        self.celery.conf.broker_transport_options = {"polling_interval": 0.01}
        self.publisher: EventPublisher | None = None
        self.runtime: WorkerRuntime | None = None
        self._relay: Relay | None = None
        self._worker: Any = None

    @property
    def service(self) -> SessionService:
        return self.storage.service

    def __enter__(self) -> EmbeddedPipeline:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        self.runtime = WorkerRuntime(self.settings, storage=self.storage, policies=self._policies)
        install_runtime(self.celery, self.runtime)
        self.celery.loader.import_default_modules()
        self._start_worker()
        self._start_relay()
        self.publisher = EventPublisher(
            MEMORY_BROKER,
            queue_prefix=self.settings.queue_prefix,
            partitions=1,
            max_payload_bytes=self.settings.max_payload_bytes,
            max_buffered=self._max_buffered,
        )

    def _start_worker(self) -> None:
        names = self.settings.queue_names
        self._worker = self.celery.WorkController(
            app=self.celery,
            pool_cls="solo",
            concurrency=1,
            queues=[*(q.name for q in names.ingest_queues()), names.evaluate, names.compact],
            hostname="embedded@localhost",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
            ready_callback=None,
        )
        self._spawn("sessionledger-worker", self._run_worker)

    def _run_worker(self) -> None:
        self.celery.set_current()  # thread-local: the solo pool looks tasks up in the current app
        self._worker.start()

    def _start_relay(self) -> None:
        sender = EvaluateSender(self.celery)
        relay = self._relay = Relay(
            self.service.ledger, self.storage.relay_positions, sender, gap_timeout=1.0
        )
        interval, sweep_every = self.settings.relay_interval, self.settings.sweep_interval
        self._spawn(
            "sessionledger-relay", lambda: relay_forever(relay, sender, interval, sweep_every, self._stop)
        )

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def busy(self) -> bool:
        """Whether anything is still on its way: buffered, queued, running, or not yet relayed."""
        if self.publisher is None or self._relay is None:
            raise RuntimeError("the pipeline is not started")
        names = self.settings.queue_names
        queued = sum(
            MemoryChannel.queues[q].qsize()
            for q in [*(q.name for q in names.ingest_queues()), names.evaluate, names.compact]
            if q in MemoryChannel.queues
        )
        relay_behind = bool(self.service.ledger.tail(self._relay.offset, 1))
        return bool(
            self.publisher.pending
            or queued
            or worker_state.active_requests
            or worker_state.reserved_requests
            or relay_behind
        )

    def wait_idle(self, timeout: float = 60.0, settle: float = 0.3) -> bool:
        """Wait until nothing has been busy for `settle` seconds; False on timeout."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if self.busy():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle:
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close(timeout=30)
        self._stop.set()
        if self._worker is not None:
            self._worker.stop(in_sighandler=False)
        for thread in self._threads:
            thread.join(timeout=10)
        if self.runtime is not None:
            self.runtime.close()
