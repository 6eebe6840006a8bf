"""The tasks' retry rules on the in-memory broker: backoff retries, redeliveries counted, then the DLQ."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa
from celery.exceptions import Ignore, Retry
from kombu import Connection
from sessionledger.infrastructure.queue_names import COMPACT_TASK, INGEST_TASK
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import create_app
from sessionledger.workers.dlq import list_dead
from sessionledger.workers.runtime import runtime_of

MEMORY = "memory://localhost//"


@pytest.fixture
def celery():
    settings = Settings(
        broker_url=MEMORY,
        queue_prefix=f"r{uuid.uuid4().hex[:8]}",
        database_url="memory://",
        max_retries=2,
        retry_backoff=3,
    )
    app = create_app(settings)
    app.loader.import_default_modules()
    return app


def call(task, *args, retries: int = 0, redelivered: bool = False):
    task.push_request(
        id="task-1",
        args=list(args),
        kwargs={},
        retries=retries,
        called_directly=False,  # as in a worker: a retry is sent to the broker
        delivery_info={"redelivered": redelivered},
    )
    try:
        return task(*args)
    finally:
        task.pop_request()


def queued(celery, queue: str) -> list:
    names = celery.sessionledger_settings.queue_names
    with Connection(MEMORY) as connection:
        bound = next(q for q in names.all_queues() if q.name == queue)(connection.default_channel)
        found = []
        while (message := bound.get(no_ack=True)) is not None:
            found.append(message)
        return found


def test_a_redelivered_task_counts_as_a_retry_and_runs_again_later(celery):
    task = celery.tasks[COMPACT_TASK]
    with pytest.raises(Retry):
        call(task, "session-1", retries=0, redelivered=True)
    (again,) = queued(celery, celery.sessionledger_settings.queue_names.compact)
    assert again.headers["retries"] == 1 and again.headers["id"] == "task-1"
    assert json.loads(again.body)[0] == ["session-1"]


def test_after_the_last_retry_the_task_is_dead_lettered_with_its_reason(celery):
    task = celery.tasks[COMPACT_TASK]
    with pytest.raises(Ignore):  # acked: nothing more to do with it
        call(task, "session-1", retries=2, redelivered=True)
    (letter,) = list_dead(MEMORY, celery.sessionledger_settings.queue_names)
    assert (
        letter.task == COMPACT_TASK and letter.args == ["session-1"] and letter.session_ids == ["session-1"]
    )
    assert letter.reason == "Redelivered: delivered again after its worker was lost (gave up after 2 retries)"
    assert letter.queue == celery.sessionledger_settings.queue_names.compact


def test_a_redelivered_ingest_batch_is_simply_stored_again(celery):
    task = celery.tasks[INGEST_TASK]
    assert call(task, [], redelivered=True) == {"stored": 0, "duplicates": 0, "dead_lettered": 0}


def test_an_ingest_batch_whose_worker_keeps_dying_is_dead_lettered_past_the_limit(celery):
    redeliveries = runtime_of(celery).storage.redeliveries
    redeliveries.count("task-1")  # two earlier deliveries that lost their worker
    redeliveries.count("task-1")
    with pytest.raises(Ignore):
        call(celery.tasks[INGEST_TASK], [], redelivered=True)
    (letter,) = list_dead(MEMORY, celery.sessionledger_settings.queue_names)
    assert letter.task == INGEST_TASK
    assert letter.reason == "delivered again 3 times after its worker was lost (limit 2)"
    assert redeliveries.count("task-1") == 1  # forgotten: a replay from the dead-letter queue starts afresh


def test_an_ingest_message_that_is_not_a_batch_is_dead_lettered(celery):
    task = celery.tasks[INGEST_TASK]
    with pytest.raises(Ignore):
        call(task, {"not": "a list"})
    (letter,) = list_dead(MEMORY, celery.sessionledger_settings.queue_names)
    assert letter.reason.startswith("malformed batch")


def test_compacting_a_session_that_does_not_exist_does_nothing(celery):
    assert call(celery.tasks[COMPACT_TASK], "no-such-session") == "gone"


class Unreachable:
    """A storage whose database refuses every connection (a failover in progress)."""

    def __getattr__(self, name: str):
        raise sa.exc.OperationalError("connect", {}, ConnectionRefusedError("the database is failing over"))


def test_an_unreachable_database_is_retried_past_max_retries_until_the_window_is_spanned(celery, monkeypatch):
    """max_retries=2 and retry_backoff=3 s: the retries surely wait 1.5, 3, 6, 12, 24, 48, 96 s,
    so the default 180 s window takes 7 of them before the task is dead-lettered."""
    # restored afterwards: the process's runtimes outlive the test, and closing one must still work
    monkeypatch.setitem(runtime_of(celery).__dict__, "storage", Unreachable())
    task, names = celery.tasks[COMPACT_TASK], celery.sessionledger_settings.queue_names
    for retries in (2, 6):
        with pytest.raises(Retry) as retried:
            call(task, "session-1", retries=retries)
        (again,) = queued(celery, names.compact)
        assert again.headers["retries"] == retries + 1
        longest = min(3 * 2**retries, 600)
        assert longest / 2 <= retried.value.when <= longest  # waits at least half the backoff
    assert list_dead(MEMORY, names) == []
    with pytest.raises(Ignore):
        call(task, "session-1", retries=7)
    (letter,) = list_dead(MEMORY, names)
    assert letter.reason.startswith("OperationalError") and "gave up after 7 retries" in letter.reason


def test_the_work_s_own_failures_still_stop_at_max_retries(celery):
    task = celery.tasks[COMPACT_TASK]
    runtime = runtime_of(celery)
    runtime.__dict__["policies"] = None  # compacting then fails with an AttributeError: a bug, not an outage
    runtime.service.create_session("u", session_id="session-1")
    with pytest.raises(Ignore):
        call(task, "session-1", retries=2)
    (letter,) = list_dead(MEMORY, celery.sessionledger_settings.queue_names)
    assert letter.reason.startswith("AttributeError") and "gave up after 2 retries" in letter.reason
