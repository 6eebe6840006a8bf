"""A publisher bound to a user or an app: its identity on the wire, read back, old lines still read."""

from __future__ import annotations

import json
import uuid

import pytest
from kombu import Connection
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.codec import event_to_payload
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.infrastructure.queue_names import QueueNames
from sessionledger.infrastructure.wire import (
    PublisherIdentity,
    UndecodableEvent,
    decode_event,
    decode_published,
    encode_event,
)

MEMORY = "memory://localhost//"


def event() -> SessionEvent:
    return SessionEvent(session_id="s1", message=UserMessage("hello"))


def test_a_bound_publishers_identity_travels_with_each_event_and_is_read_back() -> None:
    for identity in (
        PublisherIdentity(user_id="alice"),
        PublisherIdentity(app_name="chat"),
        PublisherIdentity("alice", "chat"),
    ):
        sent = event()
        line = encode_event(sent, identity)
        assert json.loads(line)["identity"] == identity.as_dict()
        assert decode_published(line) == (sent, identity)
        assert decode_event(line) == sent


def test_an_unbound_line_and_a_line_from_before_identities_read_as_unbound() -> None:
    sent = event()
    assert "identity" not in json.loads(encode_event(sent))
    old = json.dumps({"id": sent.id, "session_id": sent.session_id, "event": event_to_payload(sent)})
    found, identity = decode_published(old)
    assert found == sent and not identity.bound and identity == PublisherIdentity()


@pytest.mark.parametrize(
    "identity",
    [{}, None, "alice", ["alice"], {"user_id": ""}, {"user_id": None}, {"user_id": 7}, {"user": "alice"}],
    ids=repr,
)
def test_a_line_naming_a_malformed_identity_is_refused_never_read_as_unbound(identity) -> None:
    sent = event()
    document = {"id": sent.id, "session_id": "s1", "event": event_to_payload(sent), "identity": identity}
    if identity is None:
        assert not decode_published(json.dumps(document))[1].bound  # `null` is the same as no identity
        return
    with pytest.raises(UndecodableEvent, match=r"^invalid event: ") as refused:
        decode_published(json.dumps(document))
    assert refused.value.session_id == "s1"


def test_a_bound_publisher_stamps_its_identity_on_what_it_sends() -> None:
    names = QueueNames(f"t{uuid.uuid4().hex[:8]}", 1)
    with EventPublisher(
        MEMORY, queue_prefix=names.prefix, partitions=1, user_id="alice", app_name="chat"
    ) as sender:
        sender.publish(event())
    assert sender.identity == PublisherIdentity("alice", "chat")
    with Connection(MEMORY) as connection:
        message = names.ingest_queue(0)(connection.default_channel).get(no_ack=True)
    [line] = json.loads(message.body)[0][0]
    assert decode_published(line)[1] == PublisherIdentity("alice", "chat")


@pytest.mark.parametrize("bad", [{"user_id": ""}, {"app_name": " "}, {"user_id": 3}], ids=repr)
def test_a_publisher_bound_to_a_blank_identity_is_a_value_error(bad) -> None:
    with pytest.raises(ValueError, match="must be a non-empty string"):
        EventPublisher(MEMORY, **bad)
