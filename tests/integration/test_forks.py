"""A process forked after the ledger was used (gunicorn's `--preload`, a `multiprocessing` pool,
Celery's prefork workers) and its parent both go on: the service's pooled and kept connections, its
threads, the event loop's connections, the background compactor and the publisher each serve the
child afresh, and the parent as before (`infrastructure/forks.py`). Real forks, real databases, a
real RabbitMQ; a child that hangs is killed and fails its test."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import traceback
import uuid
from collections.abc import Callable

import pytest
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.async_service import open_async_service
from sessionledger.infrastructure.audit.verify import verify
from sessionledger.infrastructure.forks import forget_in_children
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.infrastructure.queue_names import QueueNames

from tests.adapters.test_publisher import drain
from tests.conftest import SQL_BACKENDS, sql_url
from tests.e2e.queue_deployment import RABBITMQ_URL, remove_queues
from tests.integration.test_background_compaction import POLICY, append_turns, compactions

CHILD_DEADLINE = 60.0
"""Seconds a forked child may take: one that waits for ever (a call handed to threads that stayed
in the parent) is killed then."""


@pytest.fixture(params=SQL_BACKENDS)
def durable_url(request: pytest.FixtureRequest) -> str:
    return sql_url(request, request.param)


def forked(work: Callable[[], None]) -> Callable[[], None]:
    """Run `work()` in a forked child while the caller goes on; the `join()` returned waits for
    the child and fails with its traceback when `work()` raised or hung."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its exit code and traceback are all it reports
        os.close(read)
        code = 0
        try:
            work()
        except BaseException:
            os.write(write, traceback.format_exc().encode()[-60_000:])
            code = 1
        os._exit(code)
    os.close(write)

    def join() -> None:
        deadline = time.monotonic() + CHILD_DEADLINE
        while (status := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(read)
                pytest.fail(f"the forked child took more than {CHILD_DEADLINE} s")
            time.sleep(0.02)
        with os.fdopen(read, "rb") as pipe:
            said = pipe.read().decode()
        assert os.waitstatus_to_exitcode(status[1]) == 0, said

    return join


class Owner:
    """Something a forked child must forget: a flag the child's `forget` sets, or an error it raises."""

    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.forgotten = False

    def forget(self) -> None:
        if self.fails:
            raise RuntimeError("this owner cannot forget")
        self.forgotten = True


def test_every_owner_forgets_in_the_child_though_another_failed() -> None:
    owners = [Owner(fails=True), Owner(fails=False), Owner(fails=True), Owner(fails=False)]
    for owner in owners:
        forget_in_children(owner, Owner.forget)

    def child() -> None:
        assert [owner.forgotten for owner in owners] == [False, True, False, True]

    forked(child)()
    assert not any(owner.forgotten for owner in owners)  # in the parent, nothing happened


def test_a_service_used_before_a_fork_serves_the_parent_and_the_child_at_once(durable_url: str) -> None:
    """Both write to one session at the same time, synchronously and from event loops. Before,
    the child's async call waited for ever, and the two shared pooled connections (the parent's
    next call failed: "server closed the connection unexpectedly")."""
    service = open_async_service(durable_url)
    ledger = service.synchronous()
    try:
        sid = ledger.create_session("u", app_name="forks").id
        ledger.append_message(sid, UserMessage("before"))
        asyncio.run(service.append_message(sid, UserMessage("before, from a loop")))

        async def appended(tag: str) -> None:
            for n in range(10):
                await asyncio.wait_for(service.append_message(sid, UserMessage(f"{tag} loop {n}")), 10)

        def child() -> None:
            for n in range(10):
                ledger.append_message(sid, UserMessage(f"child {n}"))
                assert ledger.get_messages(sid)
            asyncio.run(appended("child"))
            service.close()  # the child's own connections: the parent's stay open

        join = forked(child)
        for n in range(10):
            ledger.append_message(sid, UserMessage(f"parent {n}"))
            assert ledger.get_messages(sid)
        asyncio.run(appended("parent"))
        join()
        ledger.append_message(sid, UserMessage("after"))
        asyncio.run(service.append_message(sid, UserMessage("after, from a loop")))
        texts = [message.text for message in ledger.get_messages(sid)]
        assert len(texts) == len(set(texts)) == 2 + 4 * 10 + 2
        assert verify(ledger, sid).ok
    finally:
        service.close()


@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_a_child_forked_beside_a_live_loop_appends_from_its_own_loop(
    request: pytest.FixtureRequest, backend: str, pool_hops: list[object]
) -> None:
    """The parent's event loop stays open (a server's does) and holds the loop's connections. A
    child forked then opens its own for its own loop, where it used to find them another loop's
    and append on threads for ever; the parent's stay the parent's. (Each writes its own session:
    a head the other moved is rightly appended on threads.)"""
    service = open_async_service(sql_url(request, backend))
    ledger = service.synchronous()
    loop = asyncio.new_event_loop()
    try:
        parents, childs = (ledger.create_session("u", app_name="forks").id for _ in range(2))

        async def appended(sid: str, tag: str) -> None:
            for n in range(3):
                await asyncio.wait_for(service.append_message(sid, UserMessage(f"{tag} {n}")), 10)

        loop.run_until_complete(appended(parents, "before"))
        hopped = len(pool_hops)

        def child() -> None:
            asyncio.run(appended(childs, "child"))
            assert len(pool_hops) == hopped, "the child appended on threads, not from its loop"
            service.close()

        forked(child)()
        loop.run_until_complete(appended(parents, "after"))
        assert len(pool_hops) == hopped, "the parent's loop lost its connections to the child"
        assert [len(ledger.get_messages(sid)) for sid in (parents, childs)] == [6, 3]
        assert verify(ledger, parents).ok and verify(ledger, childs).ok
    finally:
        loop.close()
        service.close()


def test_a_background_compactor_started_before_a_fork_compacts_the_childs_sessions(
    durable_url: str,
) -> None:
    """Its thread stays in the parent: the child gets one of its own (before, the child's
    sessions were never compacted, and nothing said so)."""
    with open_service(durable_url, compaction="background", policy=POLICY) as service:
        append_turns(service, service.create_session("u").id, 1)

        def child() -> None:
            session_id = service.create_session("u").id
            append_turns(service, session_id, 8)
            service.close()  # drains the child's compactor
            with open_service(durable_url) as reader:
                assert compactions(reader, session_id) >= 1

        forked(child)()
        parents = service.create_session("u").id  # and the parent's compactor goes on
        append_turns(service, parents, 8)
    with open_service(durable_url) as reader:
        assert compactions(reader, parents) >= 1


def test_a_publisher_made_before_a_fork_delivers_for_the_parent_and_the_child() -> None:
    """Its delivery thread stays in the parent: before, the child's events waited in its buffer
    for ever (`flush` timed out) and were lost at exit."""
    names = QueueNames(f"fork{uuid.uuid4().hex[:8]}", 1)
    publisher = EventPublisher(RABBITMQ_URL, queue_prefix=names.prefix, partitions=1, flush_interval=0.01)
    try:

        def publish(text: str) -> None:
            publisher.publish(SessionEvent(session_id="s", message=UserMessage(text)))
            assert publisher.flush(timeout=10), f"{text!r} was not delivered"

        publish("parent, before")

        def child() -> None:
            publish("child")
            publisher.close()

        join = forked(child)
        publish("parent, meanwhile")
        join()
        publish("parent, after")
        publisher.close()
        received = [event.message.text for _, events in drain(names, RABBITMQ_URL) for event in events]
        assert sorted(received) == sorted(["parent, before", "child", "parent, meanwhile", "parent, after"])
    finally:
        publisher.close()
        remove_queues(RABBITMQ_URL, names)
