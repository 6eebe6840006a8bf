"""Read replicas on a real streaming standby: lag-tolerant reads come from it, a caller reads its
own writes while it lags, and a standby that goes away sends reads back to the primary.

Which server answered is seen through lag: with the standby's replay paused
(`pg_wal_replay_pause()`), a write the caller did not make is on the primary only, so a read
that misses it was answered by the standby, and a read that has it by the primary.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sessionledger.domain import EventFilter, UserMessage
from sessionledger.infrastructure import SessionService, Settings, open_async_service, open_service
from sessionledger.infrastructure.bootstrap import open_storage

from tests.integration.replication import ReplicatedPair

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@contextmanager
def replay_paused(pair: ReplicatedPair) -> Iterator[None]:
    """The standby replays nothing inside the block (everything written before it, first)."""
    pair.wait_replayed()
    pair.standby.execute("SELECT pg_wal_replay_pause()")
    try:
        yield
    finally:
        pair.standby.execute("SELECT pg_wal_replay_resume()")


def texts(service: SessionService, session_id: str, query: str) -> list[str | None]:
    return [event.message.text for event in service.get_events(session_id, EventFilter.keyword_search(query))]


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def services(replicated_database: tuple[str, str]) -> Iterator[tuple[SessionService, SessionService]]:
    """The reader (primary and replica) and another writer (the primary alone) on one ledger."""
    primary, replica = replicated_database
    with (
        open_service(primary, read_database_url=replica, replica_retry=0.5) as reader,
        open_service(primary) as writer,
    ):
        yield reader, writer


def test_lag_tolerant_reads_come_from_the_replica(
    replicated_pair: ReplicatedPair, services: tuple[SessionService, SessionService]
) -> None:
    reader, writer = services
    session = writer.create_session("ann")
    writer.append_message(session.id, UserMessage("alpha"))
    with replay_paused(replicated_pair):
        writer.append_message(session.id, UserMessage("alpha again"))
        later = writer.create_session("ann")

        assert texts(reader, session.id, "alpha") == ["alpha"]  # search: the standby, behind
        assert [s.id for s in reader.list_sessions("ann")] == [session.id]
        with reader.ledger.audit_snapshot() as snapshot:
            assert later.id not in snapshot.session_ids()
        # what writes depend on stays on the primary
        assert [m.text for m in reader.get_messages(session.id)] == ["alpha", "alpha again"]
        assert reader.event_version(session.id) == 2
        assert reader.get_session(later.id) is not None
    assert eventually(lambda: texts(reader, session.id, "alpha") == ["alpha", "alpha again"])


def test_a_caller_reads_its_own_writes_while_the_replica_lags(
    replicated_pair: ReplicatedPair, services: tuple[SessionService, SessionService]
) -> None:
    reader, writer = services
    session = reader.create_session("bob")
    with replay_paused(replicated_pair):
        reader.append_message(session.id, UserMessage("mine"))
        mine = reader.create_session("bob")
        assert texts(reader, session.id, "mine") == ["mine"]  # the primary: the standby lacks it
        assert [s.id for s in reader.list_sessions("bob")] == [session.id, mine.id]
        with reader.ledger.audit_snapshot() as snapshot:
            assert len(snapshot.records(session.id).records) == 2  # created, and the event
    # once the standby has replayed the reader's writes, it answers the reader again
    with replay_paused(replicated_pair):
        writer.append_message(session.id, UserMessage("not mine"))
        assert texts(reader, session.id, "mine") == ["mine"]


def test_a_read_racing_with_a_write_does_not_hide_that_write_from_its_writer(
    replicated_pair: ReplicatedPair, services: tuple[SessionService, SessionService], monkeypatch
) -> None:
    """Another thread's replica read lands while this thread's write runs on the primary: the
    fence it asks then is behind the write, and must not stand for it once the write returns."""
    reader, _ = services
    ledger = reader.ledger
    primary, fence = ledger._primary, ledger._fence
    create = primary.create_session

    def raced(*args, **kwargs):
        fence.position()  # the racing read, before the write commits
        return create(*args, **kwargs)

    monkeypatch.setattr(primary, "create_session", raced)
    with replay_paused(replicated_pair):
        mine = reader.create_session("carl")
        assert [s.id for s in reader.list_sessions("carl")] == [mine.id]


def test_the_async_services_loop_appends_are_read_back_while_the_replica_lags(
    replicated_pair: ReplicatedPair, replicated_database: tuple[str, str]
) -> None:
    """The async service's common append is sent from the event loop, past the replicated ledger:
    its replica reads then ask the primary how far it has written before every read."""
    primary, replica = replicated_database

    async def scenario() -> list[str | None]:
        async with open_async_service(primary, read_database_url=replica) as service:
            session = await service.create_session("eve")
            await service.get_events(session.id, EventFilter.keyword_search("x"))
            with replay_paused(replicated_pair):
                await service.append_message(session.id, UserMessage("from the loop"))
                found = await service.get_events(session.id, EventFilter.keyword_search("loop"))
        return [event.message.text for event in found]

    assert asyncio.run(scenario()) == ["from the loop"]


def test_a_replica_that_goes_away_sends_reads_to_the_primary(
    replicated_pair: ReplicatedPair, services: tuple[SessionService, SessionService]
) -> None:
    reader, writer = services
    session = writer.create_session("cat")
    writer.append_message(session.id, UserMessage("kept"))
    replicated_pair.wait_replayed()
    assert texts(reader, session.id, "kept") == ["kept"]  # the reader has a pooled standby connection
    replicated_pair.standby.stop()
    try:
        writer.append_message(session.id, UserMessage("kept too"))
        assert texts(reader, session.id, "kept") == ["kept", "kept too"]
        assert [s.id for s in reader.list_sessions("cat")] == [session.id]
        with reader.ledger.audit_snapshot() as snapshot:
            assert len(snapshot.records(session.id).records) == 3
    finally:
        replicated_pair.standby.start()
    # back, it answers again once the time it was left out has passed
    time.sleep(0.6)
    with replay_paused(replicated_pair):
        writer.append_message(session.id, UserMessage("kept three"))
        assert eventually(lambda: texts(reader, session.id, "kept") == ["kept", "kept too"])


def test_a_reading_process_reads_whole_sessions_from_the_replica(
    replicated_pair: ReplicatedPair, replicated_database: tuple[str, str]
) -> None:
    primary, replica = replicated_database
    with open_service(primary) as writer:
        session = writer.create_session("dan")
        with (
            open_storage(Settings(database_url=primary, read_database_url=replica), create=False) as reading,
            replay_paused(replicated_pair),
        ):
            writer.append_message(session.id, UserMessage("late"))
            assert len(reading.service.records(session.id)) == 1  # the standby's: created only
            assert len(writer.records(session.id)) == 2


@pytest.mark.parametrize(
    ("database_url", "read_database_url"),
    [
        ("memory://", "postgresql://postgres@127.0.0.1:5432/postgres"),
        ("sqlite:///{tmp}/ledger.db", "postgresql://postgres@127.0.0.1:5432/postgres"),
        ("postgresql://postgres@127.0.0.1:5432/postgres", "sqlite:///{tmp}/replica.db"),
        ("postgresql://postgres@127.0.0.1:5432/postgres", "postgresql://postgres@127.0.0.1:port/postgres"),
    ],
)
def test_replicas_of_anything_but_postgresql_are_refused(
    tmp_path: object, database_url: str, read_database_url: str
) -> None:
    database_url, read_database_url = (url.format(tmp=tmp_path) for url in (database_url, read_database_url))
    with pytest.raises(ValueError, match=r"replica|database URL"):
        open_service(database_url, read_database_url=read_database_url)
