"""The async service's common append, sent from the event loop on its own connections
(`ledger/async_append.py`), on PostgreSQL and on MariaDB: it takes no thread, and whenever it
cannot append (a head that moved, a conflict, a duplicate, a lost connection, a state delta, an
owner to check) the synchronous path does, so each outcome is exactly the synchronous service's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sessionledger.domain import SessionEvent, SessionNotFound, UserMessage
from sessionledger.domain.errors import ConcurrencyConflict
from sessionledger.infrastructure import AsyncSessionService, open_async_service, open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.ledger.async_append import APPLICATION_NAME, AsyncAppend

from tests.conftest import sql_url
from tests.integration.server_side import OTHER_MARIADB_CONNECTIONS, admin_sql, end_connections, on_mariadb


@pytest.fixture(params=["postgres", "mariadb"])
def loop_url(request: pytest.FixtureRequest) -> str:
    """A fresh database of each ledger whose appends are sent from the event loop."""
    return sql_url(request, request.param)


def connections(url: str) -> int:
    """The connections open on the test's database (but the one asking): on PostgreSQL the loop's
    only (`APPLICATION_NAME`); MariaDB shows no connection attributes without performance_schema
    (off by default), so there every one, the pool's too."""
    if on_mariadb(url):
        sql = f"SELECT count(*) {OTHER_MARIADB_CONNECTIONS}"
    else:
        sql = (
            "SELECT count(*) FROM pg_stat_activity"
            f" WHERE datname = current_database() AND application_name = '{APPLICATION_NAME}'"
        )
    return int(admin_sql(url, sql)[0][0])


def closed_soon(url: str, within: float = 5.0) -> bool:
    """Whether the loop's connections are gone within `within` seconds: a closed socket ends its
    server process a moment later, and the server lists it until then."""
    deadline = time.monotonic() + within
    while connections(url) != 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def drop_loop_connections(url: str) -> None:
    """The server drops the loop's connections: on MariaDB, which cannot tell them apart, every
    connection to the database, and the pool finds its own closed before it uses them again."""
    end_connections(url, "" if on_mariadb(url) else f"application_name = '{APPLICATION_NAME}'")


@pytest.fixture
def counted_hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each call the async service hands to its thread pool."""
    hops: list[str] = []
    original = AsyncSessionService.run

    async def counting(self, call):  # type: ignore[no-untyped-def]
        hops.append(getattr(call, "__qualname__", "call"))
        return await original(self, call)

    monkeypatch.setattr(AsyncSessionService, "run", counting)
    yield hops


def texts(url: str, session_id: str) -> list[str]:
    with open_service(url) as service:
        return [m.text for m in service.get_messages(session_id)]


def test_appends_from_the_loop_take_no_thread_and_keep_the_chain(
    loop_url: str, counted_hops: list[str]
) -> None:
    async def scenario() -> str:
        async with open_async_service(loop_url) as service:
            session = await service.create_session("alice", app_name="app")
            await service.append_message(session.id, UserMessage("first"))  # reads the head once
            counted_hops.clear()
            for n in range(20):
                await service.append_message(session.id, UserMessage(f"m{n}"))
            for n in range(5):
                event = SessionEvent(session_id=session.id, message=UserMessage(f"e{n}"))
                assert await service.append_event(event) is True
            assert counted_hops == []
            return session.id

    session_id = asyncio.run(scenario())
    assert texts(loop_url, session_id) == [
        "first",
        *(f"m{n}" for n in range(20)),
        *(f"e{n}" for n in range(5)),
    ]
    with open_service(loop_url) as service:
        assert verify(service, session_id).ok


def test_every_other_outcome_is_the_synchronous_services(loop_url: str) -> None:
    async def scenario() -> None:
        async with open_async_service(loop_url) as service:
            session = await service.create_session("alice", app_name="app")
            await service.append_message(session.id, UserMessage("warm"))
            version = await service.event_version(session.id)
            with pytest.raises(ConcurrencyConflict):
                await service.append_event(
                    SessionEvent(session_id=session.id, message=UserMessage("x")),
                    expected_version=version - 1,
                )
            event = SessionEvent(session_id=session.id, message=UserMessage("once"))
            assert await service.append_event(event, expected_version=version) is True
            assert await service.append_event(event) is False  # its id is taken: a duplicate
            with pytest.raises(SessionNotFound):
                await service.append_message("no-such-session", UserMessage("x"))
            with pytest.raises(ValueError):
                await service.append_message(session.id, UserMessage("x"), user_id="mallory")
            stored = await service.append_message(session.id, UserMessage("s"), state_delta={"k": 1})
            assert stored.state_delta == {"k": 1}
            assert (await service.get_session(session.id)).state["k"] == 1  # type: ignore[union-attr]
            messages = await service.get_messages(session.id)
            assert [m.text for m in messages] == ["warm", "once", "s"]

    asyncio.run(scenario())


def test_a_head_moved_by_another_writer_is_caught_and_the_append_still_made(loop_url: str) -> None:
    async def scenario() -> str:
        async with open_async_service(loop_url) as service:
            session = await service.create_session("alice", app_name="app")
            await service.append_message(session.id, UserMessage("a"))
            with open_service(loop_url) as other:  # another process's service, another head cache
                other.append_message(session.id, UserMessage("b"))
            await service.append_message(session.id, UserMessage("c"))
            return session.id

    session_id = asyncio.run(scenario())
    assert texts(loop_url, session_id) == ["a", "b", "c"]
    with open_service(loop_url) as service:
        assert verify(service, session_id).ok


def test_a_session_read_first_is_appended_to_from_the_loop_at_once(
    loop_url: str, counted_hops: list[str]
) -> None:
    """An agent reads its session, then writes to it: the read leaves the head in the cache, so even
    a service that never wrote to the session sends its first append from the loop; a head moved
    since the read is caught as any other."""
    with open_service(loop_url) as other:  # another process wrote the sessions
        read, moved = (other.create_session("alice").id for _ in range(2))
        other.append_message(read, UserMessage("before"))

    async def scenario() -> None:
        async with open_async_service(loop_url) as service:
            assert await service.get_session(read) is not None
            assert await service.get_session(moved) is not None
            counted_hops.clear()
            await service.append_message(read, UserMessage("after"))
            assert counted_hops == []
            with open_service(loop_url) as other:
                other.append_message(moved, UserMessage("meanwhile"))
            await service.append_message(moved, UserMessage("after"))

    asyncio.run(scenario())
    assert texts(loop_url, read) == ["before", "after"]
    assert texts(loop_url, moved) == ["meanwhile", "after"]
    with open_service(loop_url) as service:
        assert verify(service, read).ok and verify(service, moved).ok


def test_a_lost_connection_loses_no_append_and_is_replaced(loop_url: str, counted_hops: list[str]) -> None:
    async def scenario() -> str:
        async with open_async_service(loop_url) as service:
            session = await service.create_session("alice", app_name="app")
            await service.append_message(session.id, UserMessage("a"))
            await service.append_message(session.id, UserMessage("b"))
            drop_loop_connections(loop_url)
            counted_hops.clear()
            await service.append_message(session.id, UserMessage("c"))  # sync path: the pool's checks
            assert counted_hops, "the append on a lost connection was not handed to the synchronous path"
            counted_hops.clear()
            await service.append_message(session.id, UserMessage("d"))
            assert counted_hops == []  # a new loop connection
            return session.id

    session_id = asyncio.run(scenario())
    assert texts(loop_url, session_id) == ["a", "b", "c", "d"]


def test_many_tasks_on_one_session_and_one_service_on_two_loops(loop_url: str) -> None:
    service = open_async_service(loop_url)

    async def writers(session_id: str, tag: str) -> None:
        async def writer(name: str) -> None:
            for n in range(25):
                await service.append_message(session_id, UserMessage(f"{tag}-{name}-{n}"))

        await asyncio.gather(*(writer(str(w)) for w in range(4)))

    async def first() -> str:
        session = await service.create_session("alice", app_name="app")
        await writers(session.id, "one")
        return session.id

    session_id = asyncio.run(first())
    asyncio.run(writers(session_id, "two"))  # a second loop: the first loop's connection is closed with it
    asyncio.run(service.aclose())
    stored = texts(loop_url, session_id)
    assert len(stored) == 200 and len(set(stored)) == 200
    for tag in ("one", "two"):
        for w in range(4):
            mine = [t for t in stored if t.startswith(f"{tag}-{w}-")]
            assert mine == [f"{tag}-{w}-{n}" for n in range(25)]  # each writer's order kept
    with open_service(loop_url) as check:
        assert verify(check, session_id).ok


def test_many_coroutines_at_once_wait_for_a_loop_connection_instead_of_a_thread(
    loop_url: str, counted_hops: list[str]
) -> None:
    """60 coroutines appending at once share the loop's `pool_size` connections: none is handed to
    the threads (whose GIL traffic kept the loop waiting), and no more connections are opened."""

    async def scenario() -> list[str]:
        async with open_async_service(loop_url, pool_size=3) as service:
            sessions = [(await service.create_session("alice", app_name="app")).id for _ in range(60)]
            counted_hops.clear()
            before = connections(loop_url)

            async def writer(session_id: str) -> None:
                for n in range(4):
                    await service.append_message(session_id, UserMessage(f"{session_id}-{n}"))

            await asyncio.gather(*(writer(s) for s in sessions))
            assert counted_hops == []
            assert connections(loop_url) == before + 3
            return sessions

    sessions = asyncio.run(scenario())
    assert closed_soon(loop_url)  # closed with the service
    with open_service(loop_url) as service:
        for session_id in sessions:
            stored = [m.text for m in service.get_messages(session_id)]
            assert stored == [f"{session_id}-{n}" for n in range(4)]
            assert verify(service, session_id).ok


def test_a_coroutine_cancelled_while_waiting_for_a_connection_loses_none(
    loop_url: str, counted_hops: list[str]
) -> None:
    async def scenario() -> str:
        async with open_async_service(loop_url, pool_size=1) as service:
            session = await service.create_session("alice", app_name="app")
            await service.append_message(session.id, UserMessage("a"))
            counted_hops.clear()
            first = asyncio.create_task(service.append_message(session.id, UserMessage("b")))
            waiting = asyncio.create_task(service.append_message(session.id, UserMessage("never")))
            await asyncio.sleep(0)  # both started: the first holds the one connection, the other waits
            waiting.cancel()
            await first
            with pytest.raises(asyncio.CancelledError):
                await waiting
            for text in ("c", "d"):  # the connection is still the loop's, and free
                await service.append_message(session.id, UserMessage(text))
            assert counted_hops == []
            return session.id

    session_id = asyncio.run(scenario())
    assert texts(loop_url, session_id) == ["a", "b", "c", "d"]


def test_a_connection_that_cannot_be_opened_frees_its_place_for_the_coroutines_waiting(
    loop_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first loop connection fails to open while others wait for its place: each waiter is
    woken to open one itself (or append on the pool), none waits for ever."""
    failures = [True]
    connect = AsyncAppend._connect

    async def failing_once(self: AsyncAppend) -> Any:
        if failures:
            failures.pop()
            await asyncio.sleep(0.01)  # the others queue up meanwhile
            return None
        return await connect(self)

    monkeypatch.setattr(AsyncAppend, "_connect", failing_once)

    async def scenario() -> list[str]:
        async with open_async_service(loop_url, pool_size=1) as service:
            sessions = [(await service.create_session("alice", app_name="app")).id for _ in range(5)]
            writes = (service.append_message(s, UserMessage(s)) for s in sessions)
            await asyncio.wait_for(asyncio.gather(*writes), timeout=10)
            return sessions

    for session_id in asyncio.run(scenario()):
        assert texts(loop_url, session_id) == [session_id]


def test_sqlite_and_memory_take_the_pool_as_before(database_url: str) -> None:
    if database_url.startswith(("postgresql", "mysql")):
        pytest.skip("the loop's own connections are PostgreSQL's and MariaDB's")

    async def scenario() -> None:
        async with open_async_service(database_url) as service:
            session = await service.create_session("alice", app_name="app")
            for n in range(3):
                await service.append_message(session.id, UserMessage(f"m{n}"))
            assert [m.text for m in await service.get_messages(session.id)] == ["m0", "m1", "m2"]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("argument", "from_the_loop"),
    [
        ("write_timeout=30", False),  # PyMySQL's, not asyncmy's: the appends stay on the threads
        ("read_timeout=30", True),  # PyMySQL's and asyncmy's: the loop's connections take it
    ],
)
def test_a_mariadb_url_argument_asyncmy_does_not_take_keeps_the_appends_on_the_threads(
    mariadb_url: str, counted_hops: list[str], argument: str, from_the_loop: bool
) -> None:
    """Rather than open loop connections without an argument of the URL, the async service
    appends on its threads, as before."""
    url = f"{mariadb_url}?{argument}"

    async def scenario() -> str:
        async with open_async_service(url) as service:
            session = await service.create_session("alice", app_name="app")
            await service.append_message(session.id, UserMessage("a"))
            counted_hops.clear()
            await service.append_message(session.id, UserMessage("b"))
            assert (not counted_hops) is from_the_loop, counted_hops
            return session.id

    assert texts(url, asyncio.run(scenario())) == ["a", "b"]
