"""The library's spans, through the OpenTelemetry API only, and the trace context its messages carry.

Without an SDK (or with one the application has not configured) every tracer here is the API's
no-op: a span costs a call and writes nothing, and no message carries a trace context unless the
caller's own context is already a valid one (then it travels on, as propagation should). The SDK,
if any, is the application's, or the one the command line's processes configure
(`sessionledger.workers.telemetry.configure_tracing`). The span names are public (docs/observability.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from opentelemetry import context as contexts
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanKind

__all__ = [
    "APPEND",
    "COMPACT",
    "EVALUATE",
    "INGEST",
    "PUBLISH",
    "Context",
    "Link",
    "Span",
    "SpanKind",
    "carrier_of",
    "current_carrier",
    "links_to",
    "record_span",
    "task_context",
    "traced",
    "traced_context",
    "tracer",
    "within",
]

T = TypeVar("T")

PUBLISH = "sessionledger.publish"
INGEST = "sessionledger.ingest"
APPEND = "sessionledger.append"
EVALUATE = "sessionledger.evaluate"
COMPACT = "sessionledger.compact"

tracer = trace.get_tracer("sessionledger")
"""A proxy: it becomes the SDK's tracer once a provider is set, whenever that happens."""


def traced(name: str, work: Callable[[Span], T], kind: SpanKind = SpanKind.INTERNAL) -> T:
    """`work(span)` inside a span named `name`, current while it runs, its exception recorded.

    A span that does not record (no SDK: the API's no-op) is handed over and nothing more: making
    it current would cost several microseconds of context switching for nothing, and a
    `publish()` must stay well under 20 µs.
    """
    span = tracer.start_span(name, kind=kind)
    if not span.is_recording():
        return work(span)
    with trace.use_span(span, end_on_exit=True):
        return work(span)


def record_span(name: str, start_time_ns: int, attributes: Mapping[str, str]) -> None:
    """A span named `name` for work already done, from `start_time_ns` (`time.time_ns()`) to now,
    a child of the current span: how a path that awaits its work on the event loop, with nothing
    inside it to trace, reports it without holding a span current across the await."""
    span = tracer.start_span(name, start_time=start_time_ns)
    if span.is_recording():
        span.set_attributes(attributes)
    span.end()


def carrier_of(span: Span) -> dict[str, str] | None:
    """`span`'s trace context as the configured propagators write it (W3C `traceparent` by
    default), for a message to carry; `None` when the span has no valid context (no SDK and no
    incoming trace), so that such a message carries nothing at all."""
    if not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier or None


def current_carrier() -> dict[str, str]:
    """The current trace context as message headers (empty when there is none): what a task
    sent from inside a span carries, so that the task continues its trace."""
    span = trace.get_current_span()
    return carrier_of(span) or {}


def links_to(carriers: Iterable[Mapping[str, str]]) -> list[Link]:
    """One link per distinct span among the carried trace contexts: an ingest batch merges the
    publish spans of many traces, and a link (not a parent) is how a span names several."""
    seen: dict[tuple[int, int], Link] = {}
    for carrier in carriers:
        context = trace.get_current_span(propagate.extract(carrier)).get_span_context()
        if context.is_valid:
            seen.setdefault((context.trace_id, context.span_id), Link(context))
    return list(seen.values())


class _RequestGetter(Getter[Any]):
    """Reads a Celery request's message headers as `opentelemetry-instrumentation-celery` does
    (a custom header is an attribute of the task's request)."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        value = getattr(carrier, key, None)
        if value is None:
            return None
        return list(value) if isinstance(value, list | tuple) else [str(value)]

    def keys(self, carrier: Any) -> list[str]:
        return []


def task_context(request: Any) -> Context | None:
    """The parent of a task's span: the current span when there is one (Celery's own
    instrumentation made it, from the same headers), else the trace context its message carries;
    `None` means the current context."""
    if trace.get_current_span().get_span_context().is_valid:
        return None
    return propagate.extract(request, getter=_RequestGetter())


def traced_context() -> Context | None:
    """The current context when it holds a valid span (to continue its trace later, on another
    thread), else `None`."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    return contexts.get_current()


def within(context: Context | None, work: Callable[[], T]) -> T:
    """`work()` with `context` current (`None`: the current one, left as it is)."""
    if context is None:
        return work()
    token = contexts.attach(context)
    try:
        return work()
    finally:
        contexts.detach(token)
