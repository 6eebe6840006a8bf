"""The embedded default: publisher, in-process Celery worker and relay on a SQLite ledger, or in memory."""

from __future__ import annotations

from collections import defaultdict

import pytest
from sessionledger.domain import AssistantMessage, SessionEvent, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.sharegpt import conversations
from sessionledger.infrastructure.summarizers.extractive import ExtractiveSummarizer
from sessionledger.workers import metrics
from sessionledger.workers.embedded import EmbeddedPipeline
from sessionledger.workers.metrics import read_counters
from sessionledger.workers.policy import load_policies

POLICY = """
apps.default.trigger = { type = "turns", max_turns = 4 }
apps.default.strategy = { type = "recursive", max_events_to_keep = 4, overlap_size = 1 }
"""


@pytest.fixture(params=["sqlite", "memory"])
def pipeline_storage(request):
    url = request.getfixturevalue("sqlite_url") if request.param == "sqlite" else "memory://"
    with open_storage(Settings(database_url=url)) as storage:
        yield storage


def test_real_conversations_are_ingested_in_order_and_compacted_in_the_background(pipeline_storage):
    policies = load_policies(ExtractiveSummarizer, inline=POLICY)
    published: dict[str, list[str]] = defaultdict(list)
    turns: dict[str, int] = defaultdict(int)
    with EmbeddedPipeline(pipeline_storage, policies=policies) as pipeline:
        service = pipeline.service
        for conversation in conversations(limit=25):
            session = service.create_session("demo").id
            for message in conversation.messages:
                event = SessionEvent(session_id=session, message=message)
                pipeline.publisher.publish(event)
                published[session].append(event.id)
                turns[session] += event.type.value == "user"
        assert pipeline.wait_idle(timeout=120)
        compacted = 0
        for session, ids in published.items():
            events = service.get_events(session)
            assert [event.id for event in events if not event.is_synthetic] == ids  # archived, then window
            was_compacted = any(record.kind == "compaction" for record in service.records(session))
            assert was_compacted == (turns[session] > 4), session
            compacted += was_compacted
        assert compacted > 0
    counters = read_counters(pipeline_storage.counters)  # flushed when the pipeline stopped
    assert counters[metrics.EVENTS_INGESTED] == sum(map(len, published.values()))
    assert counters[metrics.COMPACTIONS_RUN] >= compacted


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_service_opened_without_a_broker_is_compacted_by_the_workers_on_its_database(request, backend):
    """`broker_url=None`: this process publishes nothing, yet workers watching the same database
    compact what it writes (their relay tails the ledger, whoever appended)."""
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    policies = load_policies(ExtractiveSummarizer, inline=POLICY)
    with (
        open_storage(Settings(database_url=url)) as storage,
        EmbeddedPipeline(storage, policies=policies) as pipeline,
        open_service(url) as writer,
    ):
        assert writer.broker_url is None
        session = writer.create_session("no-broker").id
        for turn in range(6):  # past the policy's 4 turns
            writer.append_message(session, UserMessage(f"question {turn}"))
            writer.append_message(session, AssistantMessage(f"answer {turn}"))
        assert pipeline.wait_idle(timeout=60)
        assert [record.kind for record in writer.records(session)].count("compaction") >= 1
        assert len(writer.get_messages(session)) < 12


def test_the_embedded_publisher_refuses_what_its_ledger_would_refuse():
    """Its payload limit is the storage's, not the environment's: an oversized event never leaves."""
    with (
        open_storage(Settings(database_url="memory://", max_payload_bytes=2_000)) as storage,
        EmbeddedPipeline(storage) as pipeline,
    ):
        session = pipeline.service.create_session("demo").id
        with pytest.raises(ValueError, match="over the payload limit of 2000 bytes"):
            pipeline.publisher.publish(SessionEvent(session_id=session, message=UserMessage("x" * 3_000)))
        assert pipeline.publisher.published == 0
