"""Cancellation settles: when `CancelledError` reaches the caller of a write, the write is stored
(the next read sees it) or never will be. Writes through `AsyncSessionService`, the google-adk
adapter, the openai-agents adapter, LangGraph's checkpointer and store and LangChain's chat history
are cancelled at random points (once, or twice in a row), on memory, SQLite, PostgreSQL and
MariaDB; after each cancel the session is read at once, then again once the threads the writes run
on are idle and a little later, and the two reads must agree."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncmy
import psycopg
import pytest
import sqlalchemy as sa
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import AsyncSessionService, open_async_service, open_service
from sessionledger.infrastructure.adk import LedgerSessionService
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.langchain import LedgerChatMessageHistory
from sessionledger.infrastructure.langgraph import LedgerSaver, LedgerStore
from sessionledger.infrastructure.langgraph.checkpoints import CHECKPOINT, MESSAGE, WRITE
from sessionledger.infrastructure.ledger.async_append import APPLICATION_NAME
from sessionledger.infrastructure.openai_agents import LedgerSession

from tests.conftest import sql_url

ITERATIONS = 100
"""Cancelled writes per test and backend: enough for the unsettled ones to show (before the rule,
several in every run), few enough for a few seconds a test."""

LATE_WRITE = 0.01
"""How long after the threads are idle a write still in flight elsewhere (a statement on the
server) is given to land, before the second read."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def pause(rng: random.Random) -> None:
    """A random point in a write's run: a few turns of the event loop, or up to 3 ms."""
    if rng.random() < 0.5:
        for _ in range(rng.randrange(4)):
            await asyncio.sleep(0)
    else:
        await asyncio.sleep(rng.uniform(0, 0.003))


async def cancelled_at_random(write: Coroutine[Any, Any, Any], rng: random.Random) -> bool:
    """Run `write` and cancel it at a random point, sometimes twice: whether `CancelledError`
    reached the caller (else the write ended first)."""
    task = asyncio.ensure_future(write)
    await pause(rng)
    task.cancel()
    if rng.random() < 0.3:  # a second cancel while the first is being answered
        for _ in range(rng.randrange(1, 4)):
            await asyncio.sleep(0)
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return True
    return False


EXECUTOR_THREADS = 2
"""The threads of the event loop's default executor, where the adapters given a synchronous
`SessionService` run its calls (`with_default_executor`)."""


def with_default_executor() -> ThreadPoolExecutor:
    """A default executor of `EXECUTOR_THREADS` for the running loop (`asyncio.run` shuts it down),
    so `quiet` knows how many threads to wait for."""
    executor = ThreadPoolExecutor(EXECUTOR_THREADS)
    asyncio.get_running_loop().set_default_executor(executor)
    return executor


async def quiet(threads: AsyncSessionService | ThreadPoolExecutor) -> None:
    """Wait until no call handed to the service's threads (or to the executor of
    `with_default_executor`) is running (every thread meets the others in a barrier, so each has
    ended what it took before), then a little longer."""
    if isinstance(threads, AsyncSessionService):
        barrier = threading.Barrier(threads.settings.pool_size, timeout=10)
        meetings = [threads.run(lambda _: barrier.wait()) for _ in range(barrier.parties)]
    else:
        barrier = threading.Barrier(EXECUTOR_THREADS, timeout=10)
        loop = asyncio.get_running_loop()
        meetings = [loop.run_in_executor(threads, barrier.wait) for _ in range(barrier.parties)]
    await asyncio.gather(*meetings)
    await asyncio.sleep(LATE_WRITE)


async def check_settles(
    rng: random.Random,
    service: AsyncSessionService | ThreadPoolExecutor,
    read: Callable[[], Awaitable[Any]],
    write: Callable[[int], Coroutine[Any, Any, Any]],
    after_cancel: Callable[[Any, Any], Awaitable[None]] | None = None,
) -> int:
    """`ITERATIONS` writes cancelled at random, run on `service`'s threads (or an executor's): what
    `read()` returns right after a cancel reached the caller is what it returns once they are
    idle, and nothing changes between writes.
    `after_cancel(before, seen)` checks more (and may write). How many cancels reached the caller."""
    cancels = 0
    last = await read()
    for n in range(ITERATIONS):
        before = await read()
        assert before == last, f"write {n - 1} landed after the caller moved on"
        if not await cancelled_at_random(write(n), rng):
            last = await read()
            continue
        cancels += 1
        seen = await read()
        await quiet(service)
        last = await read()
        assert last == seen, f"write {n} landed after CancelledError reached the caller"
        if after_cancel is not None:
            await after_cancel(before, seen)
            last = await read()
    await quiet(service)
    assert await read() == last
    return cancels


# --- AsyncSessionService ---------------------------------------------------------------------


def test_async_service_writes_settle_before_the_cancel_reaches_the_caller(database_url: str) -> None:
    rng = random.Random(25)
    user = unique("user")

    async def scenario() -> int:
        async with open_async_service(database_url) as service:
            main = (await service.create_session(user, app_name="cancel")).id
            extra: list[str] = []

            async def read() -> tuple[list[str], int]:
                sessions = [s.id for s in await service.list_sessions(user)]
                return sessions, await service.event_version(main)

            def write(n: int) -> Coroutine[Any, Any, Any]:
                choice = rng.randrange(4)
                if choice == 0:
                    return service.append_message(main, UserMessage(f"m{n}"))
                if choice == 1:
                    return service.append_event(SessionEvent(session_id=main, message=UserMessage(f"e{n}")))
                if choice == 2 or not extra:
                    extra.append(unique("extra"))
                    return service.create_session(user, session_id=extra[-1], app_name="cancel")
                return service.delete_session(extra.pop(rng.randrange(len(extra))))

            return await check_settles(rng, service, read, write)

    assert asyncio.run(scenario()) > ITERATIONS // 4


# --- google-adk --------------------------------------------------------------------------------


NEWEST = GetSessionConfig(num_recent_events=3)


def text_event(text: str) -> Event:
    return Event(author="user", content=types.Content(role="user", parts=[types.Part(text=text)]))


def test_adk_append_event_settles_and_the_session_object_agrees(database_url: str) -> None:
    """As the issue saw it: a cancelled append must not land after the caller reloaded the session,
    so the reloaded copy accepts the next append (no `StaleSessionError`); and the caller's own
    `Session` shows the event exactly when it was stored, so it may go on appending too."""
    rng = random.Random(5194)
    app, user, sid = unique("app"), "u", unique("s")
    key = LedgerSessionService.ledger_id(app, user, sid)

    async def scenario() -> int:
        async with LedgerSessionService(database_url) as adk:
            copies: list[Session] = [await adk.create_session(app_name=app, user_id=user, session_id=sid)]
            sent: list[Event] = []

            async def read() -> int:
                return await adk.service.event_version(key)

            def write(n: int) -> Coroutine[Any, Any, Any]:
                sent.append(text_event(f"t{n}"))
                return adk.append_event(copies[-1], sent[-1])

            async def after_cancel(before: int, seen: int) -> None:
                assert seen in (before, before + 1)
                caller = copies[-1]
                shown = bool(caller.events) and caller.events[-1].id == sent[-1].id
                assert (caller._storage_update_marker, shown) == (str(seen), seen > before), (
                    "the caller's session disagrees with the ledger"
                )
                if rng.random() < 0.5:  # the caller reloads, as google-adk tells it to, and goes on
                    reloaded = await adk.get_session(
                        app_name=app, user_id=user, session_id=sid, config=NEWEST
                    )
                    assert reloaded is not None
                    copies.append(reloaded)
                await adk.append_event(copies[-1], text_event("after"))

            return await check_settles(rng, adk.service, read, write, after_cancel)

    assert asyncio.run(scenario()) > ITERATIONS // 4


# --- openai-agents -----------------------------------------------------------------------------


def test_openai_agents_add_items_settles_whole_or_not_at_all(database_url: str) -> None:
    rng = random.Random(33)
    sid = unique("s")

    async def scenario() -> int:
        session = LedgerSession(sid, database_url=database_url)
        added: list[list[Any]] = []
        try:

            async def read() -> int:
                return await session.service.event_version(sid)

            def write(n: int) -> Coroutine[Any, Any, Any]:
                added.append([{"role": "user", "content": f"{n}.{k}"} for k in range(rng.randint(1, 3))])
                return session.add_items(added[-1])

            async def after_cancel(before: int, seen: int) -> None:
                if seen != before:  # stored: all of the call's items, never some
                    assert seen == before + len(added[-1])
                    assert await session.get_items(limit=len(added[-1])) == added[-1]

            return await check_settles(rng, session.service, read, write, after_cancel)
        finally:
            await session.close()

    assert asyncio.run(scenario()) > ITERATIONS // 4


# --- langgraph ---------------------------------------------------------------------------------


def test_langgraph_puts_settle_whole_or_not_at_all(database_url: str) -> None:
    """`aput` and `aput_writes` to a thread the saver knows (on PostgreSQL and MariaDB sent from
    the event loop) are stored whole or not at all when the cancel reaches the caller, and the
    saver's next put finds the thread's head where the last one left it."""
    rng = random.Random(81)
    tid = unique("thread")

    async def scenario() -> int:
        async with open_async_service(database_url) as service, LedgerSaver(service=service) as saver:
            thread = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
            latest = [await saver.aput(thread, generate_checkpoint(), generate_metadata(step=0), {})]

            async def read() -> tuple[int, int]:
                stored = await service.entries(tid, [CHECKPOINT, WRITE])
                return sum(e.type == CHECKPOINT for e in stored), sum(e.type == WRITE for e in stored)

            async def put(n: int) -> None:
                latest.append(
                    await saver.aput(latest[-1], generate_checkpoint(), generate_metadata(step=n), {})
                )

            def write(n: int) -> Coroutine[Any, Any, Any]:
                if rng.random() < 0.5:
                    return put(n)
                return saver.aput_writes(latest[-1], [("ch", n), ("other", str(n))], f"task-{n}")

            async def after_cancel(before: tuple[int, int], seen: tuple[int, int]) -> None:
                assert seen in (before, (before[0] + 1, before[1]), (before[0], before[1] + 2))

            cancels = await check_settles(rng, service, read, write, after_cancel)
            assert verify(saver.service, tid).ok
            return cancels

    assert asyncio.run(scenario()) > ITERATIONS // 4


def test_a_cancelled_langgraph_put_leaves_each_message_stored_once(database_url: str) -> None:
    """Each `aput` adds a message to the `messages` channel and is cancelled at random: however the
    cancels fell, every message is one entry and one event (a put whose append settled under a
    cancel knows its messages stored, so the next put does not write them again), and the last
    checkpoint holds them all."""
    rng = random.Random(47)
    tid = unique("thread")

    async def scenario() -> int:
        async with open_async_service(database_url) as service, LedgerSaver(service=service) as saver:
            latest: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
            messages: list[BaseMessage] = []

            async def put(n: int) -> None:
                nonlocal latest
                checkpoint = generate_checkpoint(
                    channel_values={"messages": list(messages)}, channel_versions={"messages": n + 1}
                )
                latest = await saver.aput(latest, checkpoint, generate_metadata(step=n), {"messages": n + 1})

            cancels = 0
            for n in range(ITERATIONS):
                messages.append(HumanMessage(f"m{n}", id=f"m{n}"))
                cancels += await cancelled_at_random(put(n), rng)
            await quiet(service)
            await put(ITERATIONS)
            keys = [entry.key for entry in await service.entries(tid, MESSAGE)]
            assert len(keys) == len(set(keys)) == ITERATIONS, "a message was written again"
            assert [event.id for event in await service.get_events(tid)] == [m.id for m in messages]
            stored = await saver.aget_tuple(latest)
            assert stored is not None and stored.checkpoint["channel_values"]["messages"] == messages
            return cancels

    assert asyncio.run(scenario()) > ITERATIONS // 4


@pytest.mark.parametrize("threads", ["async service", "default executor"])
def test_langgraph_store_writes_settle_whole_or_not_at_all(database_url: str, threads: str) -> None:
    """`LedgerStore`'s coroutines run its synchronous calls on an async service's threads (one it
    is given, or the one it opens on a URL) or, given a synchronous `SessionService`, on the loop's
    default executor: either way a cancelled `aput` or `adelete` is stored or never will be when
    the cancel reaches the caller."""
    rng = random.Random(52)
    namespace = ("memories", unique("user"))

    async def scenario() -> int:
        executor = with_default_executor()
        async with open_async_service(database_url) as service:
            store = LedgerStore(
                service=service if threads == "async service" else service.synchronous(),
                user_id=namespace[1],
            )

            async def read() -> list[tuple[str, Any]]:
                return sorted((item.key, item.value) for item in await store.asearch(namespace, limit=50))

            def write(n: int) -> Coroutine[Any, Any, Any]:
                key = f"k{rng.randrange(8)}"
                if rng.random() < 0.7:
                    return store.aput(namespace, key, {"n": n})
                return store.adelete(namespace, key)

            return await check_settles(rng, service if threads == "async service" else executor, read, write)

    assert asyncio.run(scenario()) > ITERATIONS // 4


# --- langchain ---------------------------------------------------------------------------------


def test_langchain_history_writes_settle_whole_or_not_at_all(database_url: str) -> None:
    """`LedgerChatMessageHistory` given a synchronous `SessionService` runs its calls on the loop's
    default executor: a cancelled `aadd_messages` or `aclear` is done whole or not at all when the
    cancel reaches the caller."""
    rng = random.Random(61)
    sid = unique("s")

    async def scenario() -> int:
        executor = with_default_executor()
        with open_service(database_url) as service:
            history = LedgerChatMessageHistory(sid, service=service, user_id=unique("user"))

            async def read() -> list[BaseMessage]:
                return await history.aget_messages()

            def write(n: int) -> Coroutine[Any, Any, Any]:
                if rng.random() < 0.1:
                    return history.aclear()
                return history.aadd_messages(
                    [HumanMessage(f"{n}.{k}", id=f"{n}.{k}") for k in range(rng.randint(1, 3))]
                )

            return await check_settles(rng, executor, read, write)

    assert asyncio.run(scenario()) > ITERATIONS // 4


# --- the append sent from the event loop (PostgreSQL, MariaDB) -----------------------------------


POLL = 0.15
"""Between two looks for a statement waiting for a lock: InnoDB refreshes `innodb_trx` only once it
went unread for 0.1 s, so a closer look never sees the wait begin."""


class RowLock:
    """A session's row locked by a transaction on a connection of the test's own."""

    def __init__(self, connection: Any, waits: str) -> None:
        self._connection = connection
        self._waits = waits  # a count of the statements waiting for a lock in the test's database

    @classmethod
    @contextlib.asynccontextmanager
    async def held(cls, url: str, session_id: str) -> AsyncIterator[RowLock]:
        lock = "SELECT 1 FROM sessions WHERE id = %s FOR UPDATE"
        if url.startswith("mysql"):
            address = sa.make_url(url)
            connection = await asyncmy.connect(
                host=address.host, port=address.port, user=address.username, database=address.database
            )
            try:
                async with connection.cursor() as cursor:
                    await cursor.execute(lock, (session_id,))
                yield cls(
                    connection,
                    "SELECT count(*) FROM information_schema.innodb_trx JOIN information_schema.processlist"
                    " ON id = trx_mysql_thread_id WHERE db = DATABASE() AND trx_state = 'LOCK WAIT'"
                    f" AND trx_mysql_thread_id <> {connection.thread_id()}",
                )
            finally:
                connection.close()
            return
        admin = url.replace("postgresql+psycopg://", "postgresql://", 1)
        async with await psycopg.AsyncConnection.connect(admin) as blocker:
            await blocker.execute(lock, (session_id,))
            yield cls(
                blocker,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                f" AND application_name = '{APPLICATION_NAME}' AND wait_event_type = 'Lock'",
            )

    async def waited_for(self) -> bool:
        """Whether a statement of the async service's own connections waits for the lock."""
        cursor = self._connection.cursor()
        await cursor.execute(self._waits)
        row = await cursor.fetchone()
        return row is not None and row[0] > 0

    async def release(self) -> None:
        await self._connection.rollback()


@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_a_loop_append_cancelled_twice_while_its_statement_waits_settles(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """The statement is on the server, waiting for a row lock another connection holds, when the
    caller is cancelled, twice. psycopg's own answer (ask the server to cancel, drop the connection
    at the second cancel) left the statement waiting, to commit once the lock was released, after
    the caller had read the session without it. Now the cancel waits for the statement's end."""
    url = sql_url(request, backend)

    async def scenario() -> None:
        async with open_async_service(url) as service:
            session_id = (await service.create_session("alice", app_name="app")).id
            await service.append_message(session_id, UserMessage("first"))  # the head, cached: from the loop
            async with RowLock.held(url, session_id) as blocker:
                append = asyncio.ensure_future(service.append_message(session_id, UserMessage("cancelled")))
                async with asyncio.timeout(10):  # sent from the loop, it waits for the row
                    while not await blocker.waited_for():
                        await asyncio.sleep(POLL)
                append.cancel()
                await asyncio.sleep(0)  # psycopg would be asking the server to cancel the statement
                append.cancel()
                await asyncio.wait((append,), timeout=0.2)
                seen = None
                if append.done():  # the cancel reached the caller with the lock still held
                    seen = await service.get_messages(session_id)
                await blocker.release()  # the lock released: a statement still waiting goes on
            if seen is None:  # the cancel reaches the caller once the lock is released (or did meanwhile)
                with pytest.raises(asyncio.CancelledError):
                    await append
                seen = await service.get_messages(session_id)
            assert append.cancelled()
            await asyncio.sleep(0.2)
            assert await service.get_messages(session_id) == seen, "the append landed after the cancel"
            assert [m.text for m in seen] in (["first"], ["first", "cancelled"])
            await service.append_message(session_id, UserMessage("after"))  # the connection is fine

    asyncio.run(scenario())


@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_a_loop_put_cancelled_twice_while_its_statement_waits_settles(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """As the one-event append above, an adapter's append from the loop (LangGraph's `aput` to a
    thread it knows): the cancel waits for the statement, and the saver's next put, from the head
    the statement left, is made from the loop too."""
    url = sql_url(request, backend)
    thread = {"configurable": {"thread_id": unique("thread"), "checkpoint_ns": ""}}

    async def checkpoints(saver: LedgerSaver) -> list[int]:
        return [c.metadata["step"] async for c in saver.alist(thread)]

    async def scenario() -> None:
        async with LedgerSaver(url) as saver:
            first = await saver.aput(thread, generate_checkpoint(), generate_metadata(step=1), {})
            first = await saver.aput(
                first, generate_checkpoint(), generate_metadata(step=2), {}
            )  # from the loop
            async with RowLock.held(url, thread["configurable"]["thread_id"]) as blocker:
                put = asyncio.ensure_future(
                    saver.aput(first, generate_checkpoint(), generate_metadata(step=3), {})
                )
                async with asyncio.timeout(10):  # sent from the loop, it waits for the row
                    while not await blocker.waited_for():
                        await asyncio.sleep(POLL)
                put.cancel()
                await asyncio.sleep(0)
                put.cancel()
                await asyncio.wait((put,), timeout=0.2)
                assert not put.done(), "the cancel reached the caller with the statement waiting"
                await blocker.release()
            with pytest.raises(asyncio.CancelledError):
                await put
            seen = await checkpoints(saver)
            await asyncio.sleep(0.2)
            assert await checkpoints(saver) == seen == [3, 2, 1]  # the statement ran to its end
            await saver.aput(first, generate_checkpoint(), generate_metadata(step=4), {})
            assert await checkpoints(saver) == [4, 3, 2, 1]

    asyncio.run(scenario())
