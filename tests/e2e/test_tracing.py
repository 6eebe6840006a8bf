"""One trace from an agent's `publish()` to the compaction and its model call, across real processes.

An agent process (`traced_agent.py`, its own SDK and console exporter) publishes a conversation
to RabbitMQ; `sessionledger worker --role ingest` and `--role tasks`, started by the command line
with `OTEL_TRACES_EXPORTER=console`, store it, evaluate the session and compact it with the
summarizer talking to the offline model over HTTP. The spans are read back from the console
exporter's JSON in each process's output. The relay is left out on purpose: it wakes sessions
from the ledger, which carries no trace context, so with it a compaction could run outside the
trace; without it the only way to the compaction is the traced one this test is about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sessionledger.infrastructure.offline_model import OfflineServer

from tests.e2e.queue_deployment import RABBITMQ_URL, ROOT, Deployment, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]

POLICY = """
apps.default.trigger = { type = "turns", max_turns = 3 }
apps.default.strategy = { type = "recursive", max_events_to_keep = 4, overlap_size = 1 }
"""
MODEL = "offline-summarizer"
TRACING = {
    "OTEL_TRACES_EXPORTER": "console",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_BSP_SCHEDULE_DELAY": "100",
}


def spans_in(text: str) -> list[dict[str, Any]]:
    """The console exporter's spans (indented JSON documents) among a process's other output."""
    decoder = json.JSONDecoder()
    found = []
    starts = [0] if text.startswith("{\n") else []
    starts += [i + 1 for i in range(len(text)) if text.startswith("\n{\n", i)]
    for start in starts:
        try:
            document, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(document, dict) and "context" in document:
            found.append(document)
    return found


@pytest.fixture(scope="module")
def model():
    with OfflineServer() as server:
        yield server


@pytest.fixture(scope="module", params=["library spans", "with celery's"])
def deployment(request, tmp_path_factory, model):
    """Workers with the library's spans alone, then with Celery's instrumentation as well."""
    from tests.conftest import _pg_database

    database = _pg_database()
    deployment = Deployment(
        next(database),
        RABBITMQ_URL,
        tmp_path_factory.mktemp("tracing"),
        partitions=2,
        policy=POLICY,
        openai_base_url=model.base_url,
        openai_api_key="test-key",
        summarizer_model=MODEL,
    )
    deployment.env.update(TRACING)
    if request.param == "with celery's":
        deployment.env["SESSIONLEDGER_OTEL_INSTRUMENT"] = "celery"
    try:
        for role in ("ingest", "tasks"):
            start_cli_worker(deployment, role)
        for role in ("ingest", "tasks"):
            deployment.wait_ready(role)
        yield deployment
    finally:
        deployment.close()
        next(database, None)


def start_cli_worker(deployment: Deployment, role: str) -> None:
    log = open(deployment.logs / f"{role}.log", "ab")  # noqa: SIM115 - owned by the process
    deployment.processes[role] = subprocess.Popen(
        [sys.executable, "-m", "sessionledger", "worker", f"--role={role}"]
        + (["--concurrency=1"] if role == "tasks" else []),
        env=deployment.env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def publish_from_an_agent(deployment: Deployment, spans_file: Path, session_id: str, turns: int) -> None:
    subprocess.run(
        [sys.executable, "-m", "tests.e2e.traced_agent", str(spans_file), session_id, str(turns)],
        env={key: value for key, value in deployment.env.items() if not key.startswith("OTEL_")},
        cwd=ROOT,
        check=True,
        timeout=60,
    )


def test_one_trace_joins_publish_ingest_compaction_and_the_model_call(deployment, tmp_path):
    session_id = deployment.service.create_session("alice").id
    agent_spans = tmp_path / "agent-spans.json"
    publish_from_an_agent(deployment, agent_spans, session_id, turns=5)

    def compacted() -> dict[str, Any] | None:
        return next(
            (
                span
                for span in spans_in(deployment.log_text("tasks"))
                if span["name"] == "sessionledger.compact"
                and span["attributes"].get("sessionledger.session_id") == session_id
                and span["attributes"].get("sessionledger.archived_count")
            ),
            None,
        )

    compact = wait_for(compacted, 60, "a traced compaction of the session")
    agent = spans_in(agent_spans.read_text())
    publishes = [span for span in agent if span["name"] == "sessionledger.publish"]
    (turn,) = [span for span in agent if span["name"] == "agent turn"]
    assert len(publishes) == 10
    assert {span["context"]["trace_id"] for span in publishes} == {turn["context"]["trace_id"]}
    assert all(span["parent_id"] == turn["context"]["span_id"] for span in publishes)
    assert all(span["attributes"]["sessionledger.session_id"] == session_id for span in publishes)

    def ingested() -> list[dict[str, Any]] | None:
        """The ingest spans once every publish span is linked (a batch's span is exported in the
        next round of its process's batch processor, which may be after the compaction's)."""
        spans = [
            span for span in spans_in(deployment.log_text("ingest")) if span["name"] == "sessionledger.ingest"
        ]
        linked = {link["context"]["span_id"] for span in spans for link in span["links"]}
        return spans if {span["context"]["span_id"] for span in publishes} <= linked else None

    ingests = wait_for(ingested, 10, "ingest spans linking every publish span")
    assert all(
        link["context"]["trace_id"] == turn["context"]["trace_id"]
        for span in ingests
        for link in span["links"]
    )

    # the compaction continues the trace of the ingest that woke it, through its evaluation (and,
    # with Celery's instrumentation, through Celery's publish and run spans between them)
    trigger = next(span for span in ingests if span["context"]["trace_id"] == compact["context"]["trace_id"])

    def joined() -> dict[str, dict[str, Any]] | None:
        """The workers' spans by id, once the compaction's ancestors reach the ingest span (a
        parent ends, and is exported, after its child: Celery's run span after the compaction)."""
        spans = spans_in(deployment.log_text("ingest")) + spans_in(deployment.log_text("tasks"))
        workers = {span["context"]["span_id"]: span for span in spans}
        return workers if trigger in ancestors(compact, workers) else None

    workers = wait_for(joined, 10, "the compaction's ancestors up to the ingest span that woke it")
    tasks = spans_in(deployment.log_text("tasks"))
    assert any(
        span["name"] == "sessionledger.evaluate"
        and span["attributes"]["sessionledger.outcome"] == "compact"
        and trigger in ancestors(span, workers)
        for span in tasks
    )
    appends = [span for span in workers.values() if span["name"] == "sessionledger.append"]
    assert any(trigger in ancestors(span, workers) for span in appends)
    celery_spans = [span for span in workers.values() if span["name"].startswith(("run/", "apply_async/"))]
    assert bool(celery_spans) == ("SESSIONLEDGER_OTEL_INSTRUMENT" in deployment.env)
    assert compact["attributes"]["sessionledger.user_id"] == "alice"

    # the summarizer's call: a GenAI client span inside the compaction, without the conversation
    (chat,) = [span for span in tasks if span["parent_id"] == compact["context"]["span_id"]]
    assert chat["name"] == f"chat {MODEL}"
    assert chat["kind"] == "SpanKind.CLIENT"
    attributes = chat["attributes"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == MODEL
    assert attributes["gen_ai.usage.input_tokens"] == 10  # what the offline model reports
    assert attributes["gen_ai.usage.output_tokens"] == 5
    assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert attributes["server.address"] == "127.0.0.1"
    assert "gen_ai.input.messages" not in attributes and "gen_ai.output.messages" not in attributes
    worker_spans = json.dumps(ingests + tasks + appends)
    assert "question 0" not in worker_spans and "answer 0" not in worker_spans
    assert "test-key" not in worker_spans


def ancestors(span: dict[str, Any], spans: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The span's parent, its parent's, and so on, as far as `spans` (by span id) holds them."""
    found = []
    while (parent := spans.get(span["parent_id"] or "")) is not None:
        found.append(parent)
        span = parent
    return found


def test_the_worker_names_its_service_and_leaves_an_operator_named_one(deployment):
    resources = [span["resource"]["attributes"] for span in spans_in(deployment.log_text("tasks"))]
    assert resources and {resource["service.name"] for resource in resources} == {"sessionledger-tasks"}
    env = {**deployment.env, "OTEL_SERVICE_NAME": "ledger-prod"}
    script = (
        "from opentelemetry import trace\n"
        "from sessionledger.infrastructure import Settings\n"
        "from sessionledger.workers.telemetry import configure_tracing\n"
        "assert configure_tracing(Settings(), 'relay')\n"
        "print(trace.get_tracer_provider().resource.attributes['service.name'])\n"
    )
    named = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert named.stdout.strip() == "ledger-prod"
    assert os.environ.get("OTEL_SERVICE_NAME") != "ledger-prod"  # the test's own process untouched
