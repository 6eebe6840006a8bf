"""The ingest path for real: publisher threads -> broker -> ingest worker processes -> PostgreSQL."""

from __future__ import annotations

import json
import signal
import threading
import uuid
from collections import Counter, defaultdict

import pytest
import sqlalchemy as sa
from kombu import Connection, Producer
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure.queue_names import INGEST_TASK
from sessionledger.infrastructure.wire import encode_event, task_message
from sessionledger.workers import metrics
from sessionledger.workers.metrics import read_counters

from tests.conftest import sql_url
from tests.e2e.queue_deployment import RABBITMQ_URL, REDIS_URL, Deployment, event_rows, stored_order, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SESSIONS = 200
EVENTS = 10_000
THREADS = 5


@pytest.fixture
def deployment(request, pg_url, tmp_path):
    deployment = Deployment(pg_url, request.param, tmp_path, partitions=4)
    yield deployment
    deployment.close()


@pytest.mark.parametrize(
    "deployment",
    [
        pytest.param(RABBITMQ_URL, marks=pytest.mark.rabbitmq),
        pytest.param(REDIS_URL, marks=pytest.mark.redis),
    ],
    indirect=True,
    ids=["rabbitmq", "redis"],
)
def test_every_published_event_is_stored_exactly_once_in_publish_order(deployment):
    """10,000 events from five threads over 200 sessions, two ingest workers of two partitions each."""
    service = deployment.service
    sessions = [service.create_session("agent", app_name="bench").id for _ in range(SESSIONS)]
    deployment.start("ingest-a", "ingest", "--partitions=0-1")
    deployment.start("ingest-b", "ingest", "--partitions=2-3")
    published: dict[str, list[str]] = defaultdict(list)

    def agent(thread: int, publisher) -> None:
        mine = sessions[thread::THREADS]  # a session's events come from one agent: its order is defined
        for i in range(EVENTS // THREADS):
            event = SessionEvent(session_id=mine[i % len(mine)], message=UserMessage(f"{thread}-{i}"))
            publisher.publish(event)
            published[event.session_id].append(event.id)

    with deployment.publisher() as publisher:
        threads = [threading.Thread(target=agent, args=(t, publisher)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert publisher.flush(timeout=60)
    engine = deployment.service.ledger.engine
    wait_for(lambda: len(event_rows(engine)) >= EVENTS, 90, "all events in the ledger", interval=0.5)

    rows = event_rows(engine)
    assert len(rows) == EVENTS
    assert not [key for key, n in Counter((s, e) for s, e, _ in rows).items() if n > 1]
    assert stored_order(rows) == published
    deployment.stop()  # workers flush their counters on shutdown
    counters = read_counters(deployment.storage.counters)
    assert counters[metrics.EVENTS_INGESTED] == EVENTS and counters[metrics.DUPLICATES_SKIPPED] == 0


@pytest.fixture(scope="module")
def rabbit_deployment(tmp_path_factory):
    from tests.conftest import _pg_database

    database = _pg_database()
    deployment = Deployment(next(database), RABBITMQ_URL, tmp_path_factory.mktemp("ingest"), partitions=2)
    deployment.start("ingest", "ingest")
    deployment.wait_ready("ingest")
    yield deployment
    deployment.close()
    next(database, None)


def send_raw(deployment: Deployment, body: bytes, headers: dict, partition: int = 0) -> None:
    with Connection(deployment.broker_url, transport_options={"confirm_publish": True}) as connection:
        producer = Producer(connection.channel())
        producer.publish(
            body,
            exchange=deployment.names.exchange,
            routing_key=deployment.names.ingest(partition),
            headers=headers,
            content_type="application/json",
            content_encoding="utf-8",
        )


def send_batch(deployment: Deployment, lines: list[str]) -> None:
    headers, body = task_message(INGEST_TASK, [lines])
    send_raw(deployment, body, headers)


def texts(deployment: Deployment, session_id: str) -> list[str]:
    return [event.message.text for event in deployment.service.get_events(session_id)]


@pytest.mark.rabbitmq
def test_the_same_message_delivered_twice_is_stored_once(rabbit_deployment):
    deployment = rabbit_deployment
    session = deployment.service.create_session("agent").id
    lines = [encode_event(SessionEvent(session_id=session, message=UserMessage(f"m{i}"))) for i in range(50)]
    headers, body = task_message(INGEST_TASK, [lines])
    send_raw(deployment, body, headers)
    send_raw(deployment, body, headers)  # the very same message (same task id) a second time
    later = encode_event(SessionEvent(session_id=session, message=UserMessage("after")))
    send_batch(deployment, [later])
    wait_for(lambda: texts(deployment, session)[-1:] == ["after"], 30, "the later batch")
    assert texts(deployment, session) == [f"m{i}" for i in range(50)] + ["after"]
    assert deployment.service.event_version(session) == 51


@pytest.mark.rabbitmq
def test_poison_messages_go_to_the_dead_letter_queue_with_their_reason(rabbit_deployment):
    deployment = rabbit_deployment
    session = deployment.service.create_session("agent").id

    def line(text: str, session_id: str = session) -> str:
        return encode_event(SessionEvent(session_id=session_id, message=UserMessage(text)))

    ghost = f"never-created-{session}"
    oversized = line("x" * (1024 * 1024 + 10))
    send_batch(
        deployment, [line("one"), "{broken json", line("two"), line("lost", ghost), oversized, line("three")]
    )
    send_raw(deployment, b"\x00 this is not JSON at all", {"task": INGEST_TASK, "id": "garbage-1"})
    send_raw(deployment, b"[[[]], {}, {}]", {"task": "sessionledger.no_such_task", "id": "unknown-1"})

    wait_for(lambda: texts(deployment, session) == ["one", "two", "three"], 30, "the good events")
    wait_for(lambda: len(deployment.dead_letters()) >= 5, 30, "five dead letters")
    letters = deployment.dead_letters()
    reasons = {letter.reason.split(":")[0]: letter for letter in letters}
    assert reasons["malformed JSON"].args[0] == ["{broken json"]
    assert reasons["unknown session (never created, or deleted)"].session_ids == [ghost]
    assert any("payload limit" in letter.reason and letter.args[0] == [oversized] for letter in letters)
    assert any(letter.reason.startswith("undecodable message") and letter.raw_body for letter in letters)
    assert any(letter.reason == "unknown task 'sessionledger.no_such_task'" for letter in letters)

    # the operator creates the missing session and replays: the event is stored after all
    from sessionledger.workers.dlq import replay_dead

    deployment.service.create_session("agent", session_id=ghost)
    replay_dead(deployment.broker_url, deployment.names)
    wait_for(lambda: texts(deployment, ghost) == ["lost"], 30, "the replayed event")


@pytest.mark.rabbitmq
@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_a_batch_whose_worker_dies_every_time_is_dead_lettered_and_its_partition_moves_on(
    backend, request, tmp_path
):
    """Every delivery of the batch kills its ingest worker (here: SIGKILL while it waits for the
    session row). After `max_retries` redeliveries the batch goes to the dead-letter queue instead
    of holding its partition forever (the next batch, another session's, is stored); replayed from
    there, it is stored after all."""
    deployment = Deployment(sql_url(request, backend), RABBITMQ_URL, tmp_path, partitions=1, max_retries=2)
    try:
        service = deployment.service
        session = service.create_session("agent").id
        doomed = [
            encode_event(SessionEvent(session_id=session, message=UserMessage(f"doomed {i}")))
            for i in range(3)
        ]
        engine = service.ledger.engine
        worker = deployment.start("ingest-1", "ingest")
        deployment.wait_ready("ingest-1")  # its queues exist from now on
        with engine.connect() as blocker:
            blocker.execute(sa.text("SELECT 1 FROM sessions WHERE id = :id FOR UPDATE"), {"id": session})
            send_batch(deployment, doomed)
            for attempt in range(1, 4):  # the first delivery and both redeliveries die
                if attempt > 1:
                    worker = deployment.start(f"ingest-{attempt}", "ingest")
                wait_for(lambda attempt=attempt: lock_waiters(engine) >= attempt, 60, f"delivery {attempt}")
                worker.send_signal(signal.SIGKILL)
                worker.wait(30)
            deployment.start("ingest-4", "ingest")
            wait_for(lambda: lost_worker_letters(deployment), 60, "the batch in the dead-letter queue")
            assert lock_waiters(engine) == 3  # the fourth delivery never touched the session
            blocker.rollback()
        (letter,) = lost_worker_letters(deployment)
        assert letter.args[0] == doomed and "delivered again 3 times" in letter.reason
        neighbour = service.create_session("agent").id  # on the same (only) partition
        after = encode_event(SessionEvent(session_id=neighbour, message=UserMessage("after")))
        send_batch(deployment, [after])
        wait_for(lambda: texts(deployment, neighbour) == ["after"], 30, "the next batch of the partition")
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM redeliveries")).scalar() == 0

        from sessionledger.workers.dlq import replay_dead

        replay_dead(deployment.broker_url, deployment.names)
        expected = [f"doomed {i}" for i in range(3)]
        wait_for(lambda: texts(deployment, session) == expected, 30, "the replayed batch")
    finally:
        deployment.close()


@pytest.mark.rabbitmq
def test_a_replay_never_puts_a_sessions_events_out_of_publish_order(rabbit_deployment):
    """Events dead-lettered for sessions that did not exist yet; the sessions are created and one
    of them receives a newer event. Replayed, the older event of that session stays in the
    dead-letter queue with the reason, while the other session, with nothing newer, gets its event."""
    deployment = rabbit_deployment
    late, fresh = f"late-{uuid.uuid4().hex[:8]}", f"fresh-{uuid.uuid4().hex[:8]}"

    def line(session_id: str, text: str) -> str:
        return encode_event(SessionEvent(session_id=session_id, message=UserMessage(text)))

    def letters_of(session_id: str) -> list:
        return [letter for letter in deployment.dead_letters() if session_id in letter.session_ids]

    send_batch(deployment, [line(late, "older"), line(fresh, "only")])
    wait_for(lambda: letters_of(late) and letters_of(fresh), 30, "both events dead-lettered")
    deployment.service.create_session("agent", session_id=late)
    deployment.service.create_session("agent", session_id=fresh)
    send_batch(deployment, [line(late, "newer")])
    wait_for(lambda: texts(deployment, late) == ["newer"], 30, "the newer event")

    from sessionledger.workers.dlq import replay_dead

    replay_dead(deployment.broker_url, deployment.names)
    wait_for(lambda: texts(deployment, fresh) == ["only"], 30, "the replayed event of the fresh session")
    (kept,) = wait_for(
        lambda: [letter for letter in letters_of(late) if letter.reason.startswith("replay refused")],
        30,
        "the older event back in the dead-letter queue",
    )
    assert [json.loads(kept_line)["event"]["message"]["text"] for kept_line in kept.args[0]] == ["older"]
    assert "break the session's order" in kept.reason
    assert texts(deployment, late) == ["newer"]


def lock_waiters(engine) -> int:
    """Database sessions waiting for a row lock (killed workers' sessions keep waiting, unnoticed)."""
    waiting = (
        "SELECT count(*) FROM information_schema.innodb_trx JOIN information_schema.processlist"
        " ON id = trx_mysql_thread_id WHERE db = DATABASE() AND trx_state = 'LOCK WAIT'"
        if engine.dialect.name == "mysql"
        else "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    with engine.connect() as conn:
        return conn.execute(sa.text(waiting)).scalar()


def lost_worker_letters(deployment: Deployment) -> list:
    return [letter for letter in deployment.dead_letters() if "after its worker was lost" in letter.reason]
