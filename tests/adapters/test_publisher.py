"""EventPublisher on kombu's in-memory transport (no services): batching, order, bound, retries."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import defaultdict

import pytest
from kombu import Connection
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.publisher import (
    EventPublisher,
    PublisherBroken,
    PublisherClosed,
    PublisherFull,
    UndeliveredEvents,
)
from sessionledger.infrastructure.queue_names import INGEST_TASK, QueueNames
from sessionledger.infrastructure.service import append_draft
from sessionledger.infrastructure.wire import (
    PublisherIdentity,
    UndecodableEvent,
    decode_draft,
    decode_event,
    encode_event,
)

MEMORY = "memory://localhost//"


@pytest.fixture
def names() -> QueueNames:
    return QueueNames(f"t{uuid.uuid4().hex[:8]}", 4)


def drain(names: QueueNames, broker_url: str = MEMORY) -> list[tuple[dict, list[SessionEvent]]]:
    """Every message on the ingest queues: (headers, the events it carries, decoded)."""
    messages = []
    with Connection(broker_url) as connection:
        for queue in names.ingest_queues():
            bound = queue(connection.default_channel)
            while (message := bound.get(no_ack=True)) is not None:
                args, kwargs, _embed = json.loads(message.body)
                assert kwargs == {}
                messages.append((message.headers, [decode_event(line) for line in args[0]]))
    return messages


def events_for(sessions: int, count: int) -> list[SessionEvent]:
    return [SessionEvent(session_id=f"s{i % sessions}", message=UserMessage(f"m{i}")) for i in range(count)]


def texts_by_session(events) -> dict[str, list[str]]:
    seen = defaultdict(list)
    for event in events:
        seen[event.session_id].append(event.message.text)
    return dict(seen)


def test_events_arrive_as_celery_ingest_tasks_batched_per_partition_in_publish_order(names):
    events = events_for(sessions=20, count=1000)
    with EventPublisher(MEMORY, queue_prefix=names.prefix, partitions=4, flush_interval=0.05) as publisher:
        for event in events:
            publisher.publish(event)
        assert publisher.flush(timeout=10)
        assert publisher.pending == 0
        assert publisher.delivered == 1000
    messages = drain(names)
    assert len(messages) < 40  # batched, not one message per event
    headers = messages[0][0]
    assert headers["task"] == INGEST_TASK and headers["id"] and headers["sl_events"] == len(messages[0][1])
    received = [event for _, carried in messages for event in carried]
    assert len(received) == 1000
    expected = defaultdict(list)
    for event in events:
        expected[event.session_id].append(event.message.text)
    assert texts_by_session(received) == expected
    original = {event.id: event for event in events}
    for decoded in received[:50]:
        assert decoded == original[decoded.id]
        assert decoded.timestamp == original[decoded.id].timestamp


def test_decode_event_reads_back_what_encode_event_wrote_or_says_why_not():
    event = SessionEvent(session_id="s1", message=UserMessage("hello"), metadata={"k": [1]})
    assert decode_event(encode_event(event)) == event
    with pytest.raises(UndecodableEvent, match=r"^malformed JSON: ") as malformed:
        decode_event("{not json")
    assert malformed.value.session_id is None
    with pytest.raises(UndecodableEvent, match=r"^invalid event: ") as invalid:
        decode_event(json.dumps({"id": "e1", "session_id": "s1", "event": {"message": "nope"}}))
    assert invalid.value.session_id == "s1"  # a rejected event is still traced to its session


def test_decode_draft_drafts_a_line_as_append_draft_does_whichever_path_it_takes():
    plain = SessionEvent(session_id="s1", message=UserMessage('héllo \\ "x"'), metadata={"k": [1, 2.5e-7]})
    identity = PublisherIdentity(user_id="alice")
    lines = {
        "as encode_event writes it": encode_event(plain),
        "with an identity": encode_event(plain, identity),
        "spaced out (another encoder)": json.dumps(json.loads(encode_event(plain)), indent=1),
    }
    for what, line in lines.items():
        draft, *_ = decode_draft(line)
        expected = append_draft(plain, 10**6)
        assert (draft.text, draft.content_hash, draft.event) == (
            expected.text,
            expected.content_hash,
            plain,
        ), what
        assert draft.event.metadata == plain.metadata, what
    assert decode_draft(lines["with an identity"])[1] == identity
    temp = json.loads(encode_event(plain))
    temp["event"]["state_delta"] = {"temp:scratch": 1, "kept": 2}
    draft, *_ = decode_draft(json.dumps(temp, separators=(",", ":")))
    assert dict(draft.event.state_delta) == {"kept": 2}  # dropped, as an append drops it
    huge = json.loads(encode_event(plain))
    huge["event"]["metadata"] = {"n": 2**64}  # orjson reads it as a float: the general path refuses it
    with pytest.raises(UndecodableEvent, match=r"^invalid event: .*beyond 64 bits"):
        decode_draft(json.dumps(huge, separators=(",", ":")))
    with pytest.raises(UndecodableEvent, match=r"^malformed JSON: "):
        decode_draft("{not json")


def test_each_session_stays_on_its_own_partition_queue(names):
    with EventPublisher(MEMORY, queue_prefix=names.prefix, partitions=4) as publisher:
        for event in events_for(sessions=50, count=500):
            publisher.publish(event)
    with Connection(MEMORY) as connection:
        for partition, queue in enumerate(names.ingest_queues()):
            bound = queue(connection.default_channel)
            while (message := bound.get(no_ack=True)) is not None:
                for line in json.loads(message.body)[0][0]:
                    assert names.ingest_for(decode_event(line).session_id) == names.ingest(partition)


def test_a_message_holds_at_most_max_batch_events(names):
    with EventPublisher(
        MEMORY, queue_prefix=names.prefix, partitions=4, max_batch_events=7, flush_interval=0.2
    ) as publisher:
        for event in events_for(sessions=1, count=50):
            publisher.publish(event)
    sizes = [len(carried) for _, carried in drain(names)]
    assert sum(sizes) == 50 and max(sizes) <= 7


def test_threads_publishing_concurrently_each_keep_their_order(names):
    def agent(thread: int) -> None:
        for i in range(300):
            publisher.publish(
                SessionEvent(session_id=f"t{thread}-s{i % 5}", message=UserMessage(f"{thread}:{i}"))
            )

    with EventPublisher(MEMORY, queue_prefix=names.prefix, partitions=4) as publisher:
        threads = [threading.Thread(target=agent, args=(t,)) for t in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    seen = texts_by_session(event for _, carried in drain(names) for event in carried)
    assert sum(map(len, seen.values())) == 1800
    for session, texts in seen.items():
        numbers = [int(text.split(":")[1]) for text in texts]
        assert numbers == sorted(numbers), session


class StalledPublisher(EventPublisher):
    """Its sender's connect hangs until `answer` is set, as on a broker that accepts the connection
    and never speaks, then fails."""

    def __init__(self, *args, **kwargs) -> None:
        self.connecting = threading.Event()
        self.answer = threading.Event()
        super().__init__(*args, **kwargs)

    def _ensure_producer(self):
        self.connecting.set()
        self.answer.wait()
        raise ConnectionRefusedError("the broker never answered")


def test_publish_does_not_wait_for_the_broker():
    """Every publish returns while the sender is stuck connecting: had one waited for the sender (its
    connection, or a lock it holds meanwhile), the publishing thread would still be blocked."""
    publisher = StalledPublisher(MEMORY, queue_prefix=f"t{uuid.uuid4().hex[:8]}", max_buffered=100_000)
    first, *rest = events_for(sessions=10, count=5000)

    def publish_all() -> None:
        publisher.publish(first)
        publisher.connecting.wait(10)  # the sender took it and is stuck connecting
        for event in rest:
            publisher.publish(event)

    try:
        publishing = threading.Thread(target=publish_all)
        publishing.start()
        publishing.join(60)  # a fraction of a second, however loaded the machine
        assert not publishing.is_alive(), "publish waited for the broker"
        assert publisher.connecting.is_set() and not publisher.answer.is_set()
        assert publisher.pending == 5000
    finally:
        publisher.answer.set()
        with pytest.raises(TimeoutError):
            publisher.close(timeout=0.2)


def test_when_the_broker_is_down_the_bound_is_enforced_and_nothing_is_silently_dropped():
    publisher = EventPublisher("amqp://guest:guest@127.0.0.1:1//", max_buffered=100, confirm_timeout=0.2)
    events = events_for(sessions=3, count=101)
    for event in events[:100]:
        publisher.publish(event)
    with pytest.raises(PublisherFull, match="max_buffered=100"):
        publisher.publish(events[100])
    assert publisher.pending == 100
    assert publisher.flush(timeout=0.3) is False
    with pytest.raises(TimeoutError, match="100 published events were not delivered"):
        publisher.close(timeout=0.2)
    with pytest.raises(PublisherClosed):
        publisher.publish(events[0])


class FlakyPublisher(EventPublisher):
    """Fails to connect the first `failures` times, as a broker that is down and comes back."""

    def __init__(self, *args, failures: int, **kwargs) -> None:
        self.failures = failures
        super().__init__(*args, **kwargs)

    def _ensure_producer(self):
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionRefusedError("broker down")
        return super()._ensure_producer()


def test_events_kept_while_the_broker_is_down_are_delivered_in_order_when_it_is_back(names):
    publisher = FlakyPublisher(MEMORY, queue_prefix=names.prefix, partitions=4, failures=4, max_backoff=0.05)
    events = events_for(sessions=10, count=400)
    for event in events:
        publisher.publish(event)
    assert publisher.flush(timeout=10)
    publisher.close()
    assert publisher.send_failures == 4
    expected = defaultdict(list)
    for event in events:
        expected[event.session_id].append(event.message.text)
    assert texts_by_session(event for _, carried in drain(names) for event in carried) == expected


def test_an_event_that_is_not_json_is_refused_at_publish():
    publisher = EventPublisher(MEMORY, queue_prefix=f"t{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(ValueError, match="metadata"):
            publisher.publish(
                SessionEvent(session_id="s", message=UserMessage("x"), metadata={"at": object()})
            )
        with pytest.raises(ValueError, match="SessionEvent"):
            publisher.publish({"session_id": "s"})  # type: ignore[arg-type]
        assert publisher.pending == 0
    finally:
        publisher.close()


def test_bad_options_are_value_errors():
    with pytest.raises(ValueError):
        EventPublisher("")
    with pytest.raises(ValueError):
        EventPublisher(MEMORY, max_buffered=0)
    with pytest.raises(ValueError):
        EventPublisher(MEMORY, flush_interval=0)


def test_an_event_the_ledger_would_refuse_is_refused_at_publish_in_the_services_words(names):
    """A lone surrogate once killed the delivery thread and every event accepted around it; now
    `publish()` refuses what `append_event` refuses (payload limit included), with the same text."""
    refused = [
        SessionEvent(session_id="s1", message=UserMessage("x\ud800")),
        SessionEvent(session_id="s1", message=UserMessage("ok"), metadata={"k\udfff": 1}),
        SessionEvent(session_id="s1", message=UserMessage("y" * 3_000)),
        SessionEvent(session_id="s1", message=UserMessage("ok"), state_delta={"at": object()}),
    ]
    with open_service("memory://", max_payload_bytes=2_000) as service:
        session = service.create_session("u", session_id="s1").id
        expected = []
        for event in refused:
            with pytest.raises(ValueError) as error:
                service.append_event(event)
            expected.append(str(error.value))
        assert service.event_version(session) == 0
    good = events_for(sessions=1, count=6)
    with EventPublisher(
        MEMORY, queue_prefix=names.prefix, partitions=4, max_payload_bytes=2_000
    ) as publisher:
        messages = []
        for event, bad in zip(good, [*refused, None, None], strict=True):
            publisher.publish(event)
            if bad is not None:
                with pytest.raises(ValueError) as error:
                    publisher.publish(bad)
                messages.append(str(error.value))
        assert publisher.flush(timeout=10)
        assert (publisher.published, publisher.delivered, publisher.pending) == (6, 6, 0)
    assert messages == expected
    assert "payload limit of 2000 bytes (max_payload_bytes)" in messages[2]
    received = [event for _, carried in drain(names) for event in carried]
    assert [event.message.text for event in received] == [event.message.text for event in good]


def test_the_payload_limit_defaults_to_the_settings_one(monkeypatch):
    monkeypatch.setenv("SESSIONLEDGER_MAX_PAYLOAD_BYTES", "4096")
    publisher = EventPublisher(MEMORY, queue_prefix=f"t{uuid.uuid4().hex[:8]}")
    try:
        assert publisher.max_payload_bytes == 4096
        with pytest.raises(ValueError, match="over the payload limit of 4096 bytes"):
            publisher.publish(SessionEvent(session_id="s", message=UserMessage("z" * 5_000)))
    finally:
        publisher.close()


class BrokenThreadPublisher(EventPublisher):
    """A delivery thread that meets a bug on its first round, as a thread that dies anyway."""

    def _take(self):
        raise RuntimeError("a bug in the delivery thread")


def test_when_the_delivery_thread_stops_publish_and_flush_raise_with_the_cause(names):
    publisher = BrokenThreadPublisher(MEMORY, queue_prefix=names.prefix, flush_interval=0.01)
    publisher.publish(SessionEvent(session_id="s", message=UserMessage("taken before the failure")))
    with pytest.raises(PublisherBroken, match="1 published events were not delivered") as broken:
        publisher.flush(timeout=10)
    assert isinstance(broken.value.__cause__, RuntimeError)
    assert "a bug in the delivery thread" in str(broken.value)
    with pytest.raises(PublisherBroken) as again:
        publisher.publish(SessionEvent(session_id="s", message=UserMessage("refused")))
    assert isinstance(again.value.__cause__, RuntimeError)
    assert publisher.published == 1
    with pytest.raises(PublisherBroken):
        publisher.close()


def test_leaving_a_with_block_while_the_broker_is_down_ends_and_says_what_was_lost(caplog):
    down = "amqp://guest:secret@127.0.0.1:1//"
    idle = EventPublisher(down)
    assert idle.close_timeout == 30.0  # by default: leaving a with-block never waits for ever
    idle.close()
    started = time.monotonic()
    with (
        caplog.at_level(logging.WARNING),
        pytest.raises(UndeliveredEvents) as lost,
        EventPublisher(down, confirm_timeout=0.2, close_timeout=0.5) as publisher,
    ):
        for event in events_for(sessions=2, count=3):
            publisher.publish(event)
    assert time.monotonic() - started < 5
    assert lost.value.count == 3 and isinstance(lost.value, TimeoutError)
    assert str(lost.value).startswith(
        "3 published events were not delivered to amqp://guest:***@127.0.0.1:1//"
    )
    assert "secret" not in str(lost.value)
    assert any("3 published events were not delivered" in r.getMessage() for r in caplog.records)


def test_an_exception_leaving_the_with_block_is_not_hidden_by_the_undelivered_events(caplog):
    with (
        caplog.at_level(logging.WARNING),
        pytest.raises(KeyError, match="the agent's own error"),
        EventPublisher("amqp://guest:guest@127.0.0.1:1//", close_timeout=0.3) as publisher,
    ):
        publisher.publish(SessionEvent(session_id="s", message=UserMessage("x")))
        raise KeyError("the agent's own error")
    assert any("1 published events were not delivered" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("notaurl", "is not a URL"),
        ("guest:s3cret@localhost:5672", "is not a URL"),
        ("mysql://user:s3cret@localhost/db", "unsupported scheme 'mysql'"),
        ("sqs://user:s3cret@localhost", "unsupported scheme 'sqs'"),
        ("sqla+sqlite://user:s3cret@localhost/x", "unsupported scheme 'sqla\\+sqlite'"),
        ("kafka://user:s3cret@localhost:9092", "unsupported scheme 'kafka'"),
        ("amqp://user:s3cret@localhost:notaport//", "is not valid"),
        ("redis://localhost:6379/0?password=s3cret", "is not valid"),
        ("amqp://user:s3cret@localhost//?password=s3cret", "is not valid"),
    ],
)
def test_a_broker_url_that_cannot_work_is_refused_at_construction_in_one_line(url, says):
    with pytest.raises(ValueError, match=says) as refused:
        EventPublisher(url)
    message = str(refused.value)
    assert "\n" not in message and "s3cret" not in message
    if "user:" in url:
        assert "user:***@localhost" in message
