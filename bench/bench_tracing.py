"""What tracing costs: `publish()` and `append_message` with the library's spans against the same
calls with the span code taken out, in one run, without an SDK and with one.

Each mode runs in a fresh interpreter of its own (a tracer provider can be set once per process):

- `none`: no SDK configured, the API's no-op, as every application that does not trace runs:
  the `publish()` median (target < 20 µs) and the append on PostgreSQL against its untraced twin
  (target within 3 %), and on `memory://` (no database: the client's share alone, reported);
- `sdk`: the SDK's `TracerProvider` with a `BatchSpanProcessor` and an exporter that drops what it
  is handed (the cost of making and queueing spans, not of sending them): the overheads, reported.

The untraced twin replaces `tracing.traced` where the publisher and the service call it with a
function that runs the work on the API's invalid span: the call path of the code before tracing.
The two cases run call by call in turn (their order flipped each call, so the machine's load
hits both alike); a figure is the median over rounds of each round's median call. The
`publish()` calls go to RabbitMQ (`SESSIONLEDGER_BENCH_BROKER`) while the publisher's thread sends;
appends go to a fresh PostgreSQL database (`SESSIONLEDGER_BENCH_PG`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench import payloads
from bench.bench_queue import BROKER_URL
from bench.database import fresh_postgres
from bench.report import Row
from tests.e2e.queue_deployment import remove_queues

ROUNDS = 5
PUBLISHES_PER_ROUND = 5_000
APPENDS_PER_ROUND = 300


def run() -> list[Row]:
    none, sdk = measured("none"), measured("sdk")
    publish = none["publish"]["traced"]
    return [
        Row(
            "publish() median, no SDK (the API's no-op spans)",
            f"{publish:.1f} µs",
            f"untraced {none['publish']['untraced']:.1f} µs",
            publish / none["publish"]["untraced"],
            "< 20 µs",
            publish < 20,
        ),
        _append_row("append_message on PostgreSQL, no SDK", none["append"], "within 3 %"),
        _append_row("append_message on memory://, no SDK (the client's share alone)", none["append_memory"]),
        _append_row("append_message on PostgreSQL, SDK, dropping exporter", sdk["append"]),
        _append_row("append_message on memory://, SDK, dropping exporter", sdk["append_memory"]),
        Row(
            "publish() median, SDK, dropping exporter",
            f"{sdk['publish']['traced']:.1f} µs",
            f"untraced {sdk['publish']['untraced']:.1f} µs",
            sdk["publish"]["traced"] / sdk["publish"]["untraced"],
            "report",
        ),
    ]


def _append_row(what: str, medians: dict[str, float], target: str = "report") -> Row:
    ratio = medians["traced"] / medians["untraced"]
    return Row(
        what,
        f"{medians['traced']:.1f} µs",
        f"untraced {medians['untraced']:.1f} µs",
        ratio,
        target,
        ratio <= 1.03 if target != "report" else None,
    )


def measured(mode: str) -> dict[str, dict[str, float]]:
    """The medians (µs) of one mode, measured in a fresh interpreter: {call: {case: median}}."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_tracing", mode], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench_tracing {mode} failed:\n{done.stderr}")
    result: dict[str, dict[str, float]] = json.loads(done.stdout.splitlines()[-1])
    return result


def measure(mode: str) -> dict[str, dict[str, float]]:
    """In the mode's own interpreter: each call traced and untraced, call by call."""
    if mode == "sdk":
        _install_sdk()
    from sessionledger.infrastructure import EventPublisher, open_service
    from sessionledger.infrastructure.queue_names import QueueNames

    untraced = _Untraced()
    names = QueueNames(f"slbench-{uuid.uuid4().hex[:8]}", 4)
    messages = payloads.messages(APPENDS_PER_ROUND * 2)
    try:
        with (
            fresh_postgres() as url,
            open_service(url) as service,
            open_service("memory://") as memory,
            EventPublisher(
                BROKER_URL, queue_prefix=names.prefix, partitions=names.partitions, max_buffered=10**7
            ) as publisher,
        ):
            session_id = service.create_session("bench", app_name="bench").id
            in_memory = memory.create_session("bench", app_name="bench").id
            events = _events(PUBLISHES_PER_ROUND)
            calls: dict[str, tuple[Callable[[Any], object], Callable[[], Sequence[Any]]]] = {
                "publish": (publisher.publish, events),
                "append": (lambda m: service.append_message(session_id, m), lambda: messages),
                "append_memory": (lambda m: memory.append_message(in_memory, m), lambda: messages),
            }
            medians: dict[str, dict[str, list[float]]] = {}
            for name, (call, items) in calls.items():
                _paired(call, items(), untraced)  # warm up: connections, statements, caches
                rounds = [_paired(call, items(), untraced) for _ in range(ROUNDS)]
                medians[name] = {case: [found[case] for found in rounds] for case in ("traced", "untraced")}
                publisher.flush()
            return {
                name: {case: statistics.median(values) for case, values in cases.items()}
                for name, cases in medians.items()
            }
    finally:
        remove_queues(BROKER_URL, names)


def _paired(call: Callable[[Any], object], items: Sequence[Any], untraced: _Untraced) -> dict[str, float]:
    """Median µs of `call` per item, traced and untraced: the two run in turn, one item each, their
    order flipped item by item, so that any drift in the machine's load hits both alike."""
    timings: dict[str, list[int]] = {"traced": [], "untraced": []}
    for n, item in enumerate(items):
        for case in ("traced", "untraced") if n % 2 else ("untraced", "traced"):
            with untraced.applied(case == "untraced"):
                started = time.perf_counter_ns()
                call(item)
                timings[case].append(time.perf_counter_ns() - started)
    return {case: statistics.median(values) / 1000 for case, values in timings.items()}


class _Untraced:
    """`traced` replaced, in the modules that call it, by the untraced call path."""

    def __init__(self) -> None:
        from opentelemetry.trace import INVALID_SPAN
        from sessionledger.infrastructure import publisher, service

        def untraced(name: str, work: Callable[[Any], Any], *args: Any, **options: Any) -> Any:
            return work(INVALID_SPAN)

        self._modules = (publisher, service)
        self._kept = [module.traced for module in self._modules]
        self._untraced = untraced

    @contextmanager
    def applied(self, on: bool) -> Iterator[None]:
        if not on:
            yield
            return
        for module in self._modules:
            module.traced = self._untraced  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for module, traced in zip(self._modules, self._kept, strict=True):
                module.traced = traced  # type: ignore[attr-defined]


def _install_sdk() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    trace.set_tracer_provider(provider)


def _events(count: int) -> Callable[[], list[Any]]:
    from sessionledger.domain import SessionEvent, UserMessage

    texts = [m.text or "" for m in payloads.messages(count)]

    def fresh() -> list[Any]:
        return [
            SessionEvent(session_id=f"s{n % 200}", message=UserMessage(text)) for n, text in enumerate(texts)
        ]

    return fresh


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
