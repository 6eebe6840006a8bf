"""Publishers bound to an identity, for real: publisher -> RabbitMQ -> ingest worker -> PostgreSQL.

A publisher bound to a user (or an app) writes to that user's sessions; its events for anyone
else's session are dead-lettered with the reason and stored nowhere. An unbound publisher keeps
writing to any session, as before identities existed.
"""

from __future__ import annotations

import pytest
from sessionledger.domain import SessionEvent, UserMessage

from tests.e2e.queue_deployment import RABBITMQ_URL, Deployment, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]


@pytest.fixture
def deployment(pg_url, tmp_path):
    deployment = Deployment(pg_url, RABBITMQ_URL, tmp_path, partitions=2)
    deployment.start("ingest", "ingest")
    deployment.wait_ready("ingest")
    yield deployment
    deployment.close()


def texts(deployment: Deployment, session_id: str) -> list[str]:
    return [event.message.text for event in deployment.service.get_events(session_id)]


def test_a_bound_publishers_event_for_another_users_session_is_dead_lettered_with_its_reason(deployment):
    service = deployment.service
    hers = service.create_session("alice", app_name="chat").id
    her_mail = service.create_session("alice", app_name="mail").id
    his = service.create_session("bob", app_name="chat").id

    with deployment.publisher(user_id="alice") as alice:
        alice.publish(SessionEvent(session_id=hers, message=UserMessage("mine")))
        alice.publish(SessionEvent(session_id=his, message=UserMessage("injected by alice")))
        alice.publish(SessionEvent(session_id=hers, message=UserMessage("mine again")))
    with deployment.publisher(user_id="alice", app_name="chat") as alice_in_chat:
        alice_in_chat.publish(SessionEvent(session_id=her_mail, message=UserMessage("wrong app")))
        alice_in_chat.publish(SessionEvent(session_id=hers, message=UserMessage("right app")))
    with deployment.publisher() as unbound:  # today's behaviour: the broker is the trust boundary
        unbound.publish(SessionEvent(session_id=his, message=UserMessage("from an unbound publisher")))

    wait_for(lambda: texts(deployment, hers) == ["mine", "mine again", "right app"], 60, "alice's events")
    wait_for(lambda: texts(deployment, his) == ["from an unbound publisher"], 60, "the unbound event")
    wait_for(lambda: len(deployment.dead_letters()) >= 2, 60, "two dead letters")

    letters = {letter.reason: letter for letter in deployment.dead_letters()}
    assert set(letters) == {
        "refused: the session does not belong to the publisher's user 'alice'",
        "refused: the session does not belong to the publisher's user 'alice' and app 'chat'",
    }
    refused = letters["refused: the session does not belong to the publisher's user 'alice'"]
    assert refused.session_ids == [his] and "injected by alice" in refused.args[0][0]
    wrong_app = letters["refused: the session does not belong to the publisher's user 'alice' and app 'chat'"]
    assert wrong_app.session_ids == [her_mail]
    assert texts(deployment, her_mail) == [] and service.event_version(his) == 1
