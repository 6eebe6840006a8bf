"""The ingest task's core for bound publishers, on the in-memory ledger: what is refused, and why."""

from __future__ import annotations

import pytest
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.wire import UNBOUND, PublisherIdentity, encode_event

from tests.adapters.test_ingest import ingest, texts

ALICE = PublisherIdentity(user_id="alice")


@pytest.fixture
def service():
    with open_service("memory://") as service:
        yield service


def line(session_id: str, text: str, identity: PublisherIdentity = UNBOUND) -> str:
    return encode_event(SessionEvent(session_id=session_id, message=UserMessage(text)), identity)


def test_a_bound_publishers_events_for_another_users_session_are_refused_with_the_reason(service):
    hers = service.create_session("alice", app_name="chat").id
    his = service.create_session("bob", app_name="chat").id
    refused = line(his, "injected", ALICE)
    report = ingest(service, [line(hers, "one", ALICE), refused, line(hers, "two", ALICE)])
    assert report.stored == 2 and texts(service, hers) == ["one", "two"] and texts(service, his) == []
    assert report.poison == {
        "refused: the session does not belong to the publisher's user 'alice'": [(refused, his)]
    }

    bound_to_app = PublisherIdentity("alice", "mail")
    report = ingest(service, [line(hers, "three", bound_to_app)])
    assert report.stored == 0 and list(report.poison) == [
        "refused: the session does not belong to the publisher's user 'alice' and app 'mail'"
    ]


def test_lines_of_several_publishers_in_one_batch_are_each_checked_and_kept_in_order(service):
    """A replay of dead letters can put lines of several publishers into one message."""
    hers = service.create_session("alice").id
    his = service.create_session("bob").id
    bob = PublisherIdentity(user_id="bob")
    batch = [
        line(hers, "a1", ALICE),
        line(his, "b1", bob),
        line(hers, "a2"),  # unbound (or from before identities): stored as before
        line(his, "b2", ALICE),  # refused
        line(hers, "a3", ALICE),
        line(his, "b3", bob),
    ]
    report = ingest(service, batch)
    assert report.stored == 5
    assert texts(service, hers) == ["a1", "a2", "a3"] and texts(service, his) == ["b1", "b3"]
    assert [len(rejected) for rejected in report.poison.values()] == [1]


def test_an_unbound_publisher_still_writes_to_any_session(service):
    his = service.create_session("bob").id
    report = ingest(service, [line(his, "from anyone")])
    assert report.stored == 1 and report.poison == {} and texts(service, his) == ["from anyone"]
