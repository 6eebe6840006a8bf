"""Background compaction for real: relay and task worker processes, a fake OpenAI server, PostgreSQL.

Appends go through `SessionService` (the relay finds them in the ledger), the policy comes from
the environment, and the summarizer is the real `openai` client talking to the fake server.
"""

from __future__ import annotations

import signal
import time

import pytest
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.workers import metrics
from sessionledger.workers.metrics import read_counters

from tests.e2e.queue_deployment import RABBITMQ_URL, Deployment, wait_for
from tests.fakes.fake_openai import FakeOpenAI, Reply

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]

POLICY = """
apps.default.trigger = { type = "turns", max_turns = 3 }
apps.default.strategy = { type = "recursive", max_events_to_keep = 4, overlap_size = 1 }
"""


@pytest.fixture(scope="module")
def fake():
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, fake):
    from tests.conftest import _pg_database

    database = _pg_database()
    deployment = Deployment(
        next(database),
        RABBITMQ_URL,
        tmp_path_factory.mktemp("compaction"),
        partitions=2,
        policy=POLICY,
        openai_base_url=fake.base_url,
        openai_api_key="test-key",
        summarizer_max_retries=0,
        summarizer_timeout=30,
        task_soft_time_limit=3,
        task_time_limit=6,
    )
    deployment.start("tasks", "tasks", "--concurrency=1")
    deployment.start("relay", "relay")
    deployment.wait_ready("tasks")
    yield deployment
    deployment.close()
    next(database, None)


def converse(service, session_id: str, turns: int, start: int = 0) -> None:
    for turn in range(start, start + turns):
        service.append_message(session_id, UserMessage(f"question {turn}"))
        service.append_message(session_id, AssistantMessage(f"answer {turn}"))


def compactions(service, session_id: str) -> int:
    return sum(1 for record in service.records(session_id) if record.kind == "compaction")


def assert_nothing_lost_or_duplicated(service, session_id: str, turns: int) -> None:
    events = service.get_events(session_id)
    real = [event.message.text for event in events if not event.is_synthetic]
    assert sorted(real) == sorted(
        [f"question {t}" for t in range(turns)] + [f"answer {t}" for t in range(turns)]
    )
    assert len({event.id for event in events}) == len(events)


def test_a_worker_killed_mid_compaction_has_its_task_redelivered_and_compacted_once(deployment, fake):
    service = deployment.service
    session = service.create_session("agent").id
    fake.fallback = Reply.text("They talked about five questions.")
    fake.enqueue(Reply.slow(30, "never delivered"))
    seen = len(fake.requests)
    converse(service, session, turns=5)

    wait_for(lambda: len(fake.requests) > seen, 30, "the compaction's summarizer call")
    (child,) = deployment.pool_children("tasks")
    child.send_signal(signal.SIGKILL)  # the pool process dies in the middle of the LLM call

    wait_for(lambda: compactions(service, session) == 1, 30, "the compaction to complete")
    assert len(fake.requests) >= seen + 2  # the killed attempt, then the redelivered one
    window = service.get_messages(session)
    assert window[1].text == "They talked about five questions."
    assert_nothing_lost_or_duplicated(service, session, turns=5)
    assert deployment.storage.leases.holder(session) is None
    converse(service, session, turns=1, start=5)  # the session keeps working
    assert compactions(service, session) == 1
    assert "WorkerLostError" in deployment.log_text("tasks")


def test_a_failing_then_slow_summarizer_leaves_the_session_usable_and_is_retried_later(deployment, fake):
    service = deployment.service
    session = service.create_session("agent").id
    fake.fallback = Reply.text("A summary, at last.")
    fake.enqueue(Reply.status_code(500), Reply.slow(10, "too late"))  # fails, then exceeds the soft limit
    seen = len(fake.requests)
    converse(service, session, turns=5)

    appended = 0
    while len(fake.requests) < seen + 3:  # while compaction keeps failing, the agent carries on
        service.append_message(session, UserMessage(f"meanwhile {appended}"))
        appended += 1
        assert service.get_messages(session)[-1].text == f"meanwhile {appended - 1}"
        time.sleep(0.5)
        assert appended < 40, "the summarizer was not retried"

    wait_for(lambda: compactions(service, session) >= 1, 30, "the retried compaction")
    assert any(event.message.text == "A summary, at last." for event in service.get_events(session))
    texts = [event.message.text for event in service.get_events(session)]
    assert [t for t in texts if t.startswith("meanwhile")] == [f"meanwhile {i}" for i in range(appended)]
    log = deployment.log_text("tasks")
    assert "SoftTimeLimitExceeded" in log and "compaction failed" in log
    assert read_counters(deployment.storage.counters)[metrics.COMPACTIONS_FAILED] >= 2
