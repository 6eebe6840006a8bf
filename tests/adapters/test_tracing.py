"""Tracing: no SDK means no output and no trace context; an application's own provider is left
alone; the summarizer's GenAI span against the offline model; the trace context on the wire.

A tracer provider can be set once per process, so each case that needs one (or needs none) runs
in a fresh interpreter of its own; the wire format's cases run here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from opentelemetry.trace import SpanContext, TraceFlags
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.records import event_draft
from sessionledger.infrastructure.tracing import links_to
from sessionledger.infrastructure.wire import UNBOUND, decode_draft, encode_event, event_line

from tests.e2e.queue_deployment import ROOT

PUBLISHED_LINE = """
from kombu import Connection
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.infrastructure.wire import read_json_body


def published_line(event):
    prefix = "t" + event.id[:8]
    with EventPublisher("memory://", queue_prefix=prefix, partitions=1) as publisher:
        publisher.publish(event)
        assert publisher.flush(5)
        names = publisher.names
    with Connection("memory://") as connection:
        message = connection.SimpleQueue(names.ingest(0)).get(timeout=5)
        return read_json_body(message.body)[0][0][0]
"""

OFFLINE_SUMMARY = """
from sessionledger.infrastructure.offline_model import Reply, offline_client
from sessionledger.infrastructure.summarizers.openai_summarizer import OpenAISummarizer


def summarize(capture):
    summarizer = OpenAISummarizer(
        "offline-summarizer", client=offline_client([Reply.text("they said hello")]), capture_content=capture
    )
    return summarizer.summarize("SYSTEM PROMPT", "USER PROMPT: hello")
"""

OWN_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""


def run_python(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh interpreter, with `env` over an environment free of `OTEL_*`."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_without_an_sdk_nothing_is_written_and_no_message_carries_a_trace_context():
    done = run_python(
        PUBLISHED_LINE
        + OFFLINE_SUMMARY
        + """
from opentelemetry import trace
from sessionledger.infrastructure import Settings, open_service
from sessionledger.infrastructure.tracing import tracer
from sessionledger.workers.telemetry import configure_tracing

assert not configure_tracing(Settings(), "worker")  # no exporter named: nothing configured
line = published_line(SessionEvent(session_id="s1", message=UserMessage("hi")))
with open_service("memory://") as service:
    session = service.create_session("alice")
    service.append_message(session.id, UserMessage("hello"))
summarize(capture=True)
assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
assert not tracer.start_span("x").is_recording()
print(line)
"""
    )
    line = json.loads(done.stdout)
    assert line["session_id"] == "s1" and "trace" not in line
    assert done.stderr == ""


def test_a_valid_incoming_context_travels_on_without_an_sdk():
    """No SDK, but the agent's caller handed it a trace: propagation passes it on unchanged."""
    done = run_python(
        PUBLISHED_LINE
        + """
from opentelemetry import context, propagate

carried = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
context.attach(propagate.extract(carried))
print(published_line(SessionEvent(session_id="s1", message=UserMessage("hi"))))
"""
    )
    assert json.loads(done.stdout)["trace"] == {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    }


def test_an_applications_own_provider_is_left_alone_and_receives_the_spans():
    done = run_python(
        OWN_PROVIDER
        + PUBLISHED_LINE
        + """
import json
from sessionledger.infrastructure import Settings
from sessionledger.workers.telemetry import configure_tracing

assert not configure_tracing(Settings(), "worker")  # OTEL_TRACES_EXPORTER=console, but the app's provider
assert trace.get_tracer_provider() is provider
line = published_line(SessionEvent(session_id="s1", message=UserMessage("secret words"), id="e1"))
(span,) = exporter.get_finished_spans()
print(json.dumps({
    "line": json.loads(line),
    "name": span.name,
    "kind": span.kind.name,
    "span_id": format(span.context.span_id, "016x"),
    "attributes": dict(span.attributes),
}))
""",
        OTEL_TRACES_EXPORTER="console",
    )
    found = json.loads(done.stdout)  # nothing else on stdout: no console exporter was configured
    assert found["name"] == "sessionledger.publish" and found["kind"] == "PRODUCER"
    assert found["line"]["trace"]["traceparent"].split("-")[2] == found["span_id"]
    assert found["attributes"]["sessionledger.session_id"] == "s1"
    assert found["attributes"]["sessionledger.event_id"] == "e1"
    assert "secret words" not in json.dumps(found["attributes"])


def test_the_command_lines_processes_configure_the_sdk_from_otel_variables_and_opt_in_sqlalchemy(tmp_path):
    done = run_python(
        """
from opentelemetry import trace
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import Settings, open_service
from sessionledger.workers.telemetry import configure_tracing

settings = Settings()
assert configure_tracing(settings, "demo")
with open_service(settings.database_url) as service:
    session = service.create_session("alice")
    service.append_message(session.id, UserMessage("hello"))
trace.get_tracer_provider().force_flush()
""",
        OTEL_TRACES_EXPORTER="console",
        SESSIONLEDGER_OTEL_INSTRUMENT="sqlalchemy",
        SESSIONLEDGER_DATABASE_URL=f"sqlite:///{tmp_path / 'ledger.db'}",
    )
    spans = console_spans(done.stdout)
    (append,) = [span for span in spans if span["name"] == "sessionledger.append"]
    assert append["resource"]["attributes"]["service.name"] == "sessionledger-demo"
    assert append["attributes"]["sessionledger.outcome"] == "stored"
    # the statements SQLAlchemy runs (the schema, the session's creation); the hot paths run on
    # the driver itself (infrastructure/ledger/driver.py), past SQLAlchemy's events
    statements = [span for span in spans if span["attributes"].get("db.system") == "sqlite"]
    assert any(span["name"].startswith("INSERT") for span in statements)


def test_the_summarizers_call_is_a_genai_client_span_with_its_content_only_when_asked():
    script = (
        OWN_PROVIDER
        + OFFLINE_SUMMARY
        + """
import json
from sessionledger.infrastructure import Settings

assert summarize(capture=Settings().otel_instrumentation_genai_capture_message_content) == "they said hello"
(span,) = exporter.get_finished_spans()
print(json.dumps({"name": span.name, "kind": span.kind.name, "attributes": dict(span.attributes)}))
"""
    )
    plain = json.loads(run_python(script).stdout)
    assert plain["name"] == "chat offline-summarizer" and plain["kind"] == "CLIENT"
    attributes = plain["attributes"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "offline-summarizer"
    assert attributes["gen_ai.usage.input_tokens"] == 10 and attributes["gen_ai.usage.output_tokens"] == 5
    assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert "PROMPT" not in json.dumps(attributes) and "hello" not in json.dumps(attributes)

    captured = json.loads(
        run_python(script, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true").stdout
    )["attributes"]
    assert "USER PROMPT: hello" in json.loads(captured["gen_ai.input.messages"])[0]["parts"][0]["content"]
    assert json.loads(captured["gen_ai.system_instructions"])[0]["content"] == "SYSTEM PROMPT"
    assert json.loads(captured["gen_ai.output.messages"])[0]["parts"][0]["content"] == "they said hello"


def test_a_compaction_in_the_applications_process_continues_the_trace_of_the_append_that_woke_it():
    done = run_python(
        OWN_PROVIDER
        + """
import json
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import open_service

policy = 'apps.default.trigger = { type = "turns", max_turns = 2 }\\n'
policy += 'apps.default.strategy = { type = "sliding", max_events = 2 }\\n'
with open_service("memory://", compaction="background", policy=policy) as service:
    session = service.create_session("alice")
    with trace.get_tracer("agent").start_as_current_span("agent turn"):
        for turn in range(3):
            service.append_message(session.id, UserMessage(f"question {turn}"))
            service.append_message(session.id, AssistantMessage(f"answer {turn}"))
print(json.dumps([
    {
        "name": span.name,
        "trace_id": span.context.trace_id,
        "span_id": span.context.span_id,
        "parent_id": span.parent.span_id if span.parent else None,
        "attributes": dict(span.attributes),
    }
    for span in exporter.get_finished_spans()
]))
"""
    )
    spans = json.loads(done.stdout)
    (turn,) = [span for span in spans if span["name"] == "agent turn"]
    appends = {span["span_id"] for span in spans if span["name"] == "sessionledger.append"}
    (compact,) = [span for span in spans if span["name"] == "sessionledger.compact"]
    assert (
        compact["trace_id"] == turn["trace_id"] and compact["attributes"]["sessionledger.archived_count"] > 0
    )
    evaluations = [span for span in spans if span["name"] == "sessionledger.evaluate"]
    assert evaluations and all(span["trace_id"] == turn["trace_id"] for span in evaluations)
    assert {span["parent_id"] for span in evaluations} <= appends | {compact["parent_id"]}


def console_spans(text: str) -> list[dict]:
    decoder = json.JSONDecoder()
    spans, index = [], text.find("{")
    while index != -1:
        span, end = decoder.raw_decode(text, index)
        spans.append(span)
        index = text.find("{", end)
    return spans


# --- the wire ----------------------------------------------------------------------------------

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_line_carries_its_trace_context_and_both_decoding_paths_read_it():
    event = SessionEvent(session_id="s1", message=UserMessage("hi"))
    line = event_line(event, event_draft(event).text, UNBOUND, {"traceparent": TRACEPARENT})
    draft, _identity, carried = decode_draft(line)  # the fast path: the line as the publisher wrote it
    assert carried == {"traceparent": TRACEPARENT} and draft.text == event_draft(event).text
    spaced = json.dumps(json.loads(line))  # the general path: the same document, written otherwise
    assert decode_draft(spaced)[2] == {"traceparent": TRACEPARENT}
    assert decode_draft(encode_event(event))[2] is None


def test_a_malformed_trace_context_is_ignored_not_a_reason_to_refuse_the_event():
    event = SessionEvent(session_id="s1", message=UserMessage("hi"))
    document = json.loads(encode_event(event))
    for malformed in ("00-abc", {"traceparent": 7}, ["x"]):
        draft, _, carried = decode_draft(json.dumps({**document, "trace": malformed}))
        assert carried is None and draft.text == event_draft(event).text


def test_an_ingest_links_once_to_each_distinct_publish_span():
    other = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    links = links_to(
        [{"traceparent": TRACEPARENT}, {"traceparent": other}, {"traceparent": TRACEPARENT}, {"x": "y"}]
    )
    assert [link.context for link in links] == [
        SpanContext(0x0AF7651916CD43DD8448EB211C80319C, span_id, True, TraceFlags(1))
        for span_id in (0xB7AD6B7169203331, 0x00F067AA0BA902B7)
    ]


def test_an_append_the_event_loop_makes_is_a_span_too(pg_url):
    """The async service appends on the event loop's own connection where it can: that path
    traces the append as the thread pool's does (`sessionledger.append`, session and outcome)."""
    script = (
        OWN_PROVIDER
        + f"""
import asyncio, json
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_async_service


async def main():
    async with open_async_service({pg_url!r}) as service:
        session = await service.create_session("alice")
        await service.append_message(session.id, UserMessage("warm: the head is read on the pool"))
        exporter.clear()
        await service.append_message(session.id, UserMessage("on the loop"))
        return session.id


session_id = asyncio.run(main())
spans = [s for s in exporter.get_finished_spans() if s.name == "sessionledger.append"]
print(json.dumps({{"session_id": session_id, "appends": [
    {{"attributes": dict(s.attributes), "took": s.end_time - s.start_time}} for s in spans
]}}))
"""
    )
    found = json.loads(run_python(script).stdout)
    (append,) = found["appends"]
    assert append["attributes"] == {
        "sessionledger.session_id": found["session_id"],
        "sessionledger.outcome": "stored",
    }
    assert append["took"] > 0
