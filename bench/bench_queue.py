"""The queue on PostgreSQL and RabbitMQ, with real worker processes.

- `publish()`: what the call costs in the agent's process, while the publisher's thread sends;
- end-to-end ingest: ShareGPT events over 200 sessions, from the first `publish()` to the last
  ledger commit (two ingest worker processes, one partition each, each of which has stored an
  event already: warm, as a deployment's workers are), against a raw batched INSERT
  of the same rows, 100 per transaction, into a copy of the ledger table on the same database,
  and, beside it, the COPY floor (the same rows in COPYs of 2,000 rows);
- latency from `publish()` to the ledger commit under a steady 1,000 events/s: p50 and p99;
- memory: an ingest worker's RSS while it works through a backlog of 1,000,000 events held by the
  broker (prefetch 1: the backlog stays in RabbitMQ, not in the worker).
Everything runs on this machine at once (agent, broker, workers, PostgreSQL share its cores).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psutil
import psycopg
from kombu import Connection, Producer
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import EventPublisher, open_service
from sessionledger.infrastructure.queue_names import INGEST_TASK, QueueNames
from sessionledger.infrastructure.wire import task_message

from bench import payloads, raw, report
from bench.database import fresh_postgres, uninterrupted
from bench.report import Row
from tests.e2e.queue_deployment import remove_queues

BROKER_URL = os.environ.get("SESSIONLEDGER_BENCH_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
ROOT = Path(__file__).resolve().parents[1]
SESSIONS = 200
E2E_EVENTS = 30_000
RAW_BATCH = 100
STEADY_RATE, STEADY_SECONDS = 1_000, 8
BACKLOG, BACKLOG_BATCH = 1_000_000, 2_000
WARM_UP, RSS_SECONDS, RSS_EVERY = 10.0, 30.0, 0.5
PARTITIONS = 2


def run() -> list[Row]:
    with fresh_postgres() as url, deployment(url) as (names, start_ingest):
        service = open_service(url)
        try:
            sessions = [service.create_session("bench", app_name="bench").id for _ in range(SESSIONS)]
            with psycopg.connect(url) as conn:
                raw_rate, copy_rate = _raw_rate(conn), _copy_rate(conn)
            rows = [_publish_cost(names)]
            workers = [start_ingest("0"), start_ingest("1")]
            _wait_consuming(names, workers)
            _warm_up(url, names, sessions)
            rows += _end_to_end(url, names, sessions, raw_rate, copy_rate)
            rows += _latency(url, names, sessions)
            for worker in workers:
                _stop(worker)
            rows.append(_memory(url, names, sessions, start_ingest))
            return rows
        finally:
            service.close()


@contextmanager
def deployment(url: str) -> Iterator[tuple[QueueNames, object]]:
    """Queues of their own (a fresh prefix), and a way to start ingest workers on them."""
    names = QueueNames(f"slbench-{uuid.uuid4().hex[:8]}", PARTITIONS)
    env = {
        **os.environ,
        "SESSIONLEDGER_DATABASE_URL": url,
        "SESSIONLEDGER_BROKER_URL": BROKER_URL,
        "SESSIONLEDGER_QUEUE_PREFIX": names.prefix,
        "SESSIONLEDGER_PARTITIONS": str(PARTITIONS),
        "SESSIONLEDGER_LOG_FORMAT": "text",
    }
    started: list[subprocess.Popen] = []
    logs = tempfile.TemporaryDirectory(prefix="slbench-")

    def start_ingest(partitions: str) -> subprocess.Popen:
        command = [
            sys.executable,
            "-m",
            "sessionledger.workers.launch",
            "ingest",
            f"--partitions={partitions}",
            "--loglevel=WARNING",
        ]
        log = open(Path(logs.name) / f"ingest-{partitions}.log", "ab")  # noqa: SIM115 - the process's
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        process.log_path = log.name  # type: ignore[attr-defined]
        started.append(process)
        return process

    try:
        yield names, start_ingest
    finally:
        with uninterrupted():
            for process in started:
                _stop(process)
            remove_queues(BROKER_URL, names)
            logs.cleanup()


def _publish_cost(names: QueueNames) -> Row:
    """Median and p99 of one `publish()` call, 50,000 calls while the thread encodes and sends."""
    events = [
        SessionEvent(session_id=f"cost-{i % SESSIONS}", message=UserMessage(f"m{i}")) for i in range(50_000)
    ]
    samples = []
    clock = time.perf_counter_ns
    with EventPublisher(BROKER_URL, queue_prefix=names.prefix, partitions=names.partitions) as publisher:
        for event in events:
            started = clock()
            publisher.publish(event)
            samples.append(clock() - started)
    samples.sort()
    median, p99 = samples[len(samples) // 2] / 1000, samples[int(len(samples) * 0.99)] / 1000
    _purge(names)
    return Row("publish() call in the agent's process", f"median {median:.1f} µs, p99 {p99:.1f} µs",
               target="median < 20 µs", passed=median < 20)  # fmt: skip


def _raw_rate(conn: psycopg.Connection) -> float:
    messages = payloads.cycled(E2E_EVENTS)
    rows = [raw.row_of(message, n) for n, message in enumerate(messages, 1)]
    raw.create_table(conn)
    started = time.perf_counter()
    with conn.cursor() as cursor:
        for start in range(0, len(rows), RAW_BATCH):
            cursor.executemany(raw._INSERT, rows[start : start + RAW_BATCH])  # the raw baseline's INSERT
            conn.commit()
    return len(rows) / (time.perf_counter() - started)


def _copy_rate(conn: psycopg.Connection) -> float:
    """The same rows as `_raw_rate`'s in COPYs of 2,000 rows (a transaction each): the bulk floor."""
    rows = [raw.row_of(message, n) for n, message in enumerate(payloads.cycled(E2E_EVENTS), 1)]
    started = time.perf_counter()
    for start in range(0, len(rows), payloads.LOAD_BATCH):
        raw.copy(conn, rows[start : start + payloads.LOAD_BATCH], "raw-copy")
    return len(rows) / (time.perf_counter() - started)


def _warm_up(url: str, names: QueueNames, sessions: list[str]) -> None:
    """An event to each ingest worker, stored before the clock starts: a worker opens its storage
    (the database pool, the schema check) with its first batch, once per process, not per batch."""
    firsts = {names.ingest_for(session): session for session in sessions}
    before = _appended(url)
    with EventPublisher(BROKER_URL, queue_prefix=names.prefix, partitions=names.partitions) as publisher:
        for session in firsts.values():
            publisher.publish(SessionEvent(session_id=session, message=UserMessage("warm-up")))
    _wait_appended(url, before + len(firsts), timeout=120)


def _end_to_end(
    url: str, names: QueueNames, sessions: list[str], raw_rate: float, copy_rate: float
) -> list[Row]:
    messages = payloads.cycled(E2E_EVENTS)
    events = [SessionEvent(session_id=sessions[i % SESSIONS], message=m) for i, m in enumerate(messages)]
    before = _appended(url)
    started = datetime.now(UTC)
    with EventPublisher(BROKER_URL, queue_prefix=names.prefix, partitions=names.partitions) as publisher:
        for event in events:
            publisher.publish(event)
    last_commit = _wait_appended(url, before + E2E_EVENTS, timeout=300)
    rate = E2E_EVENTS / (last_commit - started).total_seconds()
    ratio = rate / raw_rate
    measured = report.rate(rate, "events")
    return [
        Row(f"end-to-end ingest, {E2E_EVENTS:,} events, 2 ingest workers", measured,
            f"raw INSERT, {RAW_BATCH}/transaction {report.rate(raw_rate, 'rows')}", ratio,
            ">= 0.5 of raw rate", ratio >= 0.5),
        Row("  the same against the COPY floor", measured,
            f"raw COPY, {payloads.LOAD_BATCH:,}/transaction {report.rate(copy_rate, 'rows')}",
            rate / copy_rate, "report"),
    ]  # fmt: skip


def _latency(url: str, names: QueueNames, sessions: list[str]) -> list[Row]:
    """Publish at a steady rate; latency = the row's recorded_at - the event's timestamp."""
    count = STEADY_RATE * STEADY_SECONDS
    messages = payloads.cycled(count)
    ids = []
    tick = 0.01
    started = time.monotonic()
    with EventPublisher(BROKER_URL, queue_prefix=names.prefix, partitions=names.partitions) as publisher:
        for n, message in enumerate(messages):
            if n % int(STEADY_RATE * tick) == 0:
                time.sleep(max(0.0, started + n / STEADY_RATE - time.monotonic()))
            event = SessionEvent(session_id=sessions[n % SESSIONS], message=message)
            publisher.publish(event)
            ids.append(event.id)
    with psycopg.connect(url) as conn:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            latencies = conn.execute(
                "SELECT extract(epoch FROM recorded_at - occurred_at) FROM ledger WHERE event_id = ANY(%s)",
                (ids,),
            ).fetchall()
            conn.commit()
            if len(latencies) == count:
                break
            time.sleep(0.2)
    values = sorted(float(value) for (value,) in latencies)
    p50, p99 = statistics.median(values), values[int(len(values) * 0.99)]
    return [
        Row(f"publish -> ledger commit at a steady {STEADY_RATE:,} events/s, p50", report.duration(p50),
            target="report"),
        Row(f"publish -> ledger commit at a steady {STEADY_RATE:,} events/s, p99", report.duration(p99),
            target="report"),
    ]  # fmt: skip


def _memory(url: str, names: QueueNames, sessions: list[str], start_ingest) -> Row:
    """Fill the broker with a backlog, then sample one ingest worker's RSS while it drains it."""
    template = json.dumps({"id": "{id}", "session_id": "{session}", "event": {
        "message": {"type": "user", "text": "backlog event {n}", "tool_calls": [], "tool_responses": [],
                    "metadata": {}},
        "metadata": {}, "branch": None, "invocation_id": None, "state_delta": {},
        "timestamp": "2025-01-01T00:00:00.000000+00:00"}})  # fmt: skip
    template = template.replace('"{id}"', '"%s"').replace('"{session}"', '"%s"').replace("{n}", "%d")
    with Connection(BROKER_URL, transport_options={"confirm_publish": True}) as connection:
        channel = connection.channel()
        queue = names.ingest_queue(0)(channel)
        queue.declare()
        producer = Producer(channel, exchange=names.exchange)
        zero = [s for s in sessions if names.ingest_for(s) == names.ingest(0)]
        for start in range(0, BACKLOG, BACKLOG_BATCH):
            lines = [
                template % (uuid.uuid4().hex, zero[n % len(zero)], n)
                for n in range(start, start + BACKLOG_BATCH)
            ]
            headers, body = task_message(INGEST_TASK, [lines])
            producer.publish(body, routing_key=names.ingest(0), headers=headers,
                             content_type="application/json", content_encoding="utf-8")  # fmt: skip
    before = _stored(url)
    worker = start_ingest("0")
    process = psutil.Process(worker.pid)
    samples = []
    for _ in range(int(RSS_SECONDS / RSS_EVERY)):
        time.sleep(RSS_EVERY)
        samples.append(process.memory_info().rss)
    drained = _stored(url) - before
    _stop(worker)
    settled = samples[int(WARM_UP / RSS_EVERY) - 1]
    after_warm_up = samples[int(WARM_UP / RSS_EVERY) :]
    last, peak = samples[-1], max(after_warm_up)
    growth = peak / settled
    mib = 2**20
    return Row(
        f"ingest worker RSS, {BACKLOG:,}-event backlog, {drained:,} stored while sampled",
        f"{settled / mib:.0f} MiB at {WARM_UP:.0f} s -> {last / mib:.0f} MiB at {RSS_SECONDS:.0f} s",
        f"peak {peak / mib:.0f} MiB",
        growth,
        "flat after warm-up: peak < 1.10x",
        growth < 1.10,
    )


def _stored(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM ledger WHERE kind = 'event'").fetchone()[0]


_APPENDED = "SELECT coalesce(sum(version), 0) FROM sessions"
"""Events appended to every session (+1 each; nothing else moves a version while the benchmark
runs: no compaction, no rewind). 200 rows: polling it costs the database nothing, where a count of
the ledger's rows, ten times a second, scanned the whole table while the workers wrote to it."""
_LAST_RECORDED = """SELECT max(ledger.recorded_at) FROM sessions
    JOIN ledger ON ledger.session_id = sessions.id AND ledger.position = sessions.head_position"""
"""When the last record was stored: each session's head is its latest record."""


def _appended(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(_APPENDED).fetchone()[0]


def _wait_appended(url: str, target: int, timeout: float) -> datetime:
    """When the ledger's sessions had `target` events appended in all: the last one's record time."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            appended = conn.execute(_APPENDED).fetchone()[0]
            if appended >= target:
                return conn.execute(_LAST_RECORDED).fetchone()[0]
            time.sleep(0.1)
    raise TimeoutError(f"only {appended} of {target} events stored after {timeout}s")


def _wait_consuming(names: QueueNames, workers: list[subprocess.Popen], timeout: float = 60) -> None:
    """Until every ingest queue has its consumer (a worker takes seconds to start on a busy machine)."""
    deadline = time.monotonic() + timeout
    with Connection(BROKER_URL) as connection:
        while time.monotonic() < deadline:
            for worker in workers:
                if worker.poll() is not None:
                    raise RuntimeError(Path(worker.log_path).read_text(errors="replace"))  # type: ignore[attr-defined]
            channel = connection.channel()
            consumers = [
                queue(channel).queue_declare(passive=True).consumer_count for queue in names.ingest_queues()
            ]
            channel.close()
            if all(consumers):
                return
            time.sleep(0.2)
    raise TimeoutError("the ingest workers did not start consuming")


def _purge(names: QueueNames) -> None:
    with Connection(BROKER_URL) as connection:
        channel = connection.channel()
        for queue in names.ingest_queues():
            queue(channel).purge()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    report.main(run)
