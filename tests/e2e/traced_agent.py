"""An agent process with tracing of its own, for tests/e2e/test_tracing.py.

It configures the OpenTelemetry SDK as an application does (its own provider, a console exporter
writing to the file named by its first argument), publishes a conversation to the session named
by its second argument in one span of its own ("agent turn"), flushes and exits. The broker and
queue settings come from the `SESSIONLEDGER_*` environment, as the workers' do.

    python -m tests.e2e.traced_agent SPANS_FILE SESSION_ID TURNS
"""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from sessionledger.domain import AssistantMessage, SessionEvent, UserMessage
from sessionledger.infrastructure import Settings
from sessionledger.infrastructure.publisher import EventPublisher


def main(spans_file: str, session_id: str, turns: int) -> None:
    settings = Settings()
    with open(spans_file, "w") as out:
        provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
        trace.set_tracer_provider(provider)
        assert settings.broker_url is not None
        publisher = EventPublisher(
            settings.broker_url, queue_prefix=settings.queue_prefix, partitions=settings.partitions
        )
        with publisher, trace.get_tracer("agent").start_as_current_span("agent turn"):
            for turn in range(turns):
                publisher.publish(
                    SessionEvent(session_id=session_id, message=UserMessage(f"question {turn}"))
                )
                publisher.publish(
                    SessionEvent(session_id=session_id, message=AssistantMessage(f"answer {turn}"))
                )
            assert publisher.flush(30)
        provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
