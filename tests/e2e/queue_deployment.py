"""A throwaway queue deployment for end-to-end tests: real broker, real database, worker processes.

Each deployment has its own queue prefix (so concurrent runs never see each other's messages)
and removes its queues and keys at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import redis
import sqlalchemy as sa
from kombu import Connection
from sessionledger.infrastructure import SessionService, Settings
from sessionledger.infrastructure.bootstrap import Storage, open_storage
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.infrastructure.queue_names import QueueNames
from sessionledger.workers.dlq import DeadLetter, list_dead

RABBITMQ_URL = os.environ.get("SESSIONLEDGER_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672//")
REDIS_URL = os.environ.get("SESSIONLEDGER_TEST_REDIS", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parents[2]


class Deployment:
    """Worker processes on one database and one broker, configured through the environment."""

    def __init__(
        self,
        database_url: str,
        broker_url: str,
        logs: Path,
        partitions: int = 4,
        queue_type: str = "classic",
        **settings: Any,
    ) -> None:
        self.database_url = database_url
        self.broker_url = broker_url
        self.names = QueueNames(f"sltest-{uuid.uuid4().hex[:10]}", partitions, queue_type)
        self.logs = logs
        self.env = {
            **os.environ,
            "SESSIONLEDGER_DATABASE_URL": database_url,
            "SESSIONLEDGER_BROKER_URL": broker_url,
            "SESSIONLEDGER_QUEUE_PREFIX": self.names.prefix,
            "SESSIONLEDGER_PARTITIONS": str(partitions),
            "SESSIONLEDGER_QUEUE_TYPE": queue_type,
            "SESSIONLEDGER_RELAY_INTERVAL": "0.1",
            "SESSIONLEDGER_RETRY_BACKOFF": "1",
            "SESSIONLEDGER_RETRY_BACKOFF_MAX": "2",
            **{f"SESSIONLEDGER_{k.upper()}": str(v) for k, v in settings.items()},
        }
        self.processes: dict[str, subprocess.Popen] = {}
        self._storage: Storage | None = None

    def start(self, name: str, role: str, *options: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        process = subprocess.Popen(
            [sys.executable, "-m", "sessionledger.workers.launch", role, "--loglevel=INFO", *options],
            env=self.env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes[name] = process
        return process

    def wait_ready(self, name: str, timeout: float = 30.0) -> None:
        """Until the worker logs that it is ready (relays are ready at once)."""
        wait_for(lambda: b"ready" in (self.logs / f"{name}.log").read_bytes(), timeout, f"{name} ready")

    def pool_children(self, name: str) -> list[psutil.Process]:
        return psutil.Process(self.processes[name].pid).children()

    @property
    def storage(self) -> Storage:
        """The deployment's database as its workers see it (service, leases, counters, ...)."""
        if self._storage is None:
            self._storage = open_storage(Settings(database_url=self.database_url))
        return self._storage

    @property
    def service(self) -> SessionService:
        return self.storage.service

    def publisher(self, **options: Any) -> EventPublisher:
        return EventPublisher(
            self.broker_url,
            queue_prefix=self.names.prefix,
            partitions=self.names.partitions,
            queue_type=self.names.queue_type,
            **options,
        )

    def dead_letters(self) -> list[DeadLetter]:
        return list_dead(self.broker_url, self.names)

    def log_text(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def stop(self, name: str | None = None) -> None:
        for key in [name] if name else list(self.processes):
            stop_process(self.processes.pop(key), signal.SIGTERM, 20)

    def close(self) -> None:
        self.stop()
        if self._storage is not None:
            self._storage.close()
        remove_queues(self.broker_url, self.names)


def remove_queues(broker_url: str, names: QueueNames) -> None:
    if broker_url.startswith("redis"):
        client = redis.Redis.from_url(broker_url)
        patterns = (
            f"{names.prefix}*",
            f"_kombu.binding.{names.prefix}*",
            f"_kombu.binding_*.{names.prefix}*",
        )
        keys = [key for pattern in patterns for key in client.scan_iter(pattern)]
        if keys:
            client.delete(*keys)
        if not any(client.scan_iter("_kombu.binding.*")):  # kombu's expiry book of bindings, all gone now
            client.delete("_kombu.binding_deadlines")
        return
    with Connection(broker_url) as connection:
        channel = connection.channel()
        for queue in names.all_queues():
            channel.queue_delete(queue.name)
        for exchange in (names.prefix, names.dead):
            channel.exchange_delete(exchange)


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def stop_process(process: subprocess.Popen[Any], signum: int, timeout: float) -> bool:
    """Send `signum` and wait `timeout` seconds for the process to end, else kill it: whether it
    ended on the signal."""
    process.send_signal(signum)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
    return True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A private redis-server on a free port, with an append-only file so a restart keeps its data."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server") or "redis-server"
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        wait_for(lambda: _pings(client), 10, "redis-server to start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: redis flushes its append-only file and exits
            self.process.wait(10)
        self.process = None


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def event_rows(engine: sa.Engine) -> list[tuple[str, str, int]]:
    """(session id, event id, position) of every event row in the ledger."""
    with engine.connect() as conn:
        return list(
            conn.execute(sa.text("SELECT session_id, event_id, position FROM ledger WHERE kind = 'event'"))
        )


def stored_order(rows: list[tuple[str, str, int]]) -> dict[str, list[str]]:
    """Each session's event ids in ledger order: what the tests compare with the publish order."""
    stored: dict[str, list[str]] = defaultdict(list)
    for session_id, event_id, _ in sorted(rows, key=lambda row: (row[0], row[2])):
        stored[session_id].append(event_id)
    return stored
