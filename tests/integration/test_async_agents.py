"""What only the async agent layer has: every public method of a synchronous agent class is a
coroutine of its async twin with the same parameters; 100 concurrent `AsyncMemoryChat` turns never
stall the event loop, and turns leave nothing in reference cycles for the collector; and both chat
classes take any client with the Chat Completions surface (Azure OpenAI's client, a bare object
with `chat.completions.create`). The semantics the twins share are the sync suites'
(tests/integration/agent_faces.py runs them on both)."""

from __future__ import annotations

import asyncio
import collections
import gc
import inspect
import itertools
import statistics
import uuid
import weakref
from types import SimpleNamespace
from typing import Any

import openai
import pytest
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import agents, open_async_service, open_service
from sessionledger.infrastructure.agents import (
    AsyncMemoryChat,
    AsyncRecallTools,
    AsyncSessionMemory,
    MemoryChat,
    RecallTools,
    SessionMemory,
)
from sessionledger.infrastructure.agents.pacing import take_turn
from sessionledger.infrastructure.offline_model import (
    OfflineServer,
    Reply,
    offline_async_client,
    offline_client,
)

from bench.bench_agents import STALL_THREADS, RecallingModel, bare_loop, client_alone, concurrent_turns
from bench.timing import largest_stall

TWINS = [
    ("SessionMemory", "AsyncSessionMemory"),
    ("RecallTools", "AsyncRecallTools"),
    ("MemoryChat", "AsyncMemoryChat"),
    ("MessageWindowChatMemory", "AsyncMessageWindowChatMemory"),
    ("LedgerChatMemoryRepository", "AsyncLedgerChatMemoryRepository"),
    ("InMemoryChatMemoryRepository", "AsyncInMemoryChatMemoryRepository"),
    ("MessageChatMemoryAdvisor", "AsyncMessageChatMemoryAdvisor"),
    ("PromptChatMemoryAdvisor", "AsyncPromptChatMemoryAdvisor"),
]
SYNC_ONLY = {"as_langchain_tools", "definitions"}
"""Methods the async twin has as they are (`definitions` does no I/O) or not at all."""
TURNS = 100
STALL_ROUNDS = 3
CYCLE_TURNS = 20


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize(("sync_name", "async_name"), TWINS)
def test_every_public_method_has_a_coroutine_twin_with_its_parameters(sync_name, async_name):
    sync_class, async_class = getattr(agents, sync_name), getattr(agents, async_name)
    assert list(inspect.signature(async_class).parameters) == list(inspect.signature(sync_class).parameters)
    for name, method in inspect.getmembers(sync_class, inspect.isfunction):
        if name.startswith("_") or name in SYNC_ONLY:
            continue
        twin = getattr(async_class, name)
        assert inspect.iscoroutinefunction(twin), f"{async_name}.{name} is not a coroutine"
        assert inspect.signature(twin).parameters.keys() == inspect.signature(method).parameters.keys()


def test_the_chat_classes_refuse_the_other_faces_parts():
    with open_service("memory://") as service, pytest.raises(ValueError, match="no coroutine before"):
        AsyncMemoryChat(offline_async_client(), SessionMemory(service), model="m")  # type: ignore[arg-type]
    async_service = open_async_service("memory://")
    with pytest.raises(ValueError, match="advisor 0 has no synchronous before"):
        MemoryChat(offline_client(), AsyncSessionMemory(async_service), model="m")  # type: ignore[arg-type]
    async_service.close()
    with open_service("memory://") as service, pytest.raises(ValueError, match="a AsyncRecallTools"):
        AsyncMemoryChat(offline_async_client(), model="m", recall=RecallTools(service))  # type: ignore[arg-type]


def test_one_hundred_concurrent_turns_never_stall_the_event_loop(database_url):
    """Each turn: the memory's read and write, a recall call answered and stored, the model called
    twice, on an async service with the one thread an event loop's latency wants (`async_threads=1`),
    measured after a warm-up turn (start-up's imports and connections), in rounds beside a bare
    loop with the same ticker. The loop's median largest stall stays far under the one the client
    alone causes making the same calls at once: on `memory://`, whose ledger hands every turn back
    at once, turns whose calls all began in one step of the loop (no `pacing.take_turn`) stalled it
    380-640 ms, half the client alone's, and fail this; and far under the stall of the synchronous
    classes on the loop itself."""

    async def scenario() -> tuple[list[float], list[float], float, float]:
        async with open_async_service(database_url, async_threads=STALL_THREADS) as service:
            user = unique("u")
            client = offline_async_client(RecallingModel())
            recall = AsyncRecallTools(service)
            chat = AsyncMemoryChat(client, AsyncSessionMemory(service), model="m", recall=recall)
            await chat.complete(unique("warm"), [UserMessage("warm up")], user_id=user)
            gc.collect()
            gc.freeze()  # what is alive now leaves the collector's full passes, as bench_agents does
            stalls: list[float] = []
            bare: list[float] = []
            try:
                for _ in range(STALL_ROUNDS):
                    stalls.append(await concurrent_turns(chat, user, TURNS))
                    bare.append(await bare_loop())
                floor = await client_alone(client, recall.definitions())
            finally:
                gc.unfreeze()
            assert len(await service.list_sessions(user)) == STALL_ROUNDS * TURNS + 1
            # the sync classes on the loop (their own service: a memory:// ledger is one per open)
            blocking_service = service.synchronous()
            sync_chat = MemoryChat(
                offline_client(RecallingModel()),
                SessionMemory(blocking_service),
                model="m",
                recall=RecallTools(blocking_service),
            )

            async def blocking_turns() -> None:
                for number in range(TURNS):
                    sync_chat.complete(unique(f"s{number}"), [UserMessage("hi")], user_id=user)

            blocking_stall = await largest_stall(blocking_turns)
        return stalls, bare, floor, blocking_stall

    stalls, bare, floor, blocking_stall = asyncio.run(scenario())
    stall = statistics.median(stalls)
    shown = f"median {stall * 1000:.1f} ms of {[round(s * 1000, 1) for s in stalls]}"
    bare_shown = f"bare loop {statistics.median(bare) * 1000:.1f} ms"
    # bench_agents reports the 10 ms target: under the neighbours' load on 2 cores this machine's
    # bare loop alone stalls 3-12 ms and the turns' median 30-90 ms, so no absolute bound holds here
    assert stall < floor / 4, f"stalled {shown}, the client alone {floor * 1000:.1f} ms ({bare_shown})"
    assert blocking_stall > 2 * stall


def test_a_turn_leaves_nothing_in_reference_cycles(database_url):
    """After a warm-up, 20 concurrent turns leave (almost) no objects in reference cycles: a turn's
    reads and writes run statements built once (`ledger/events.py`), not built per call. What
    turns leave in cycles the collector finds while the loop waits for it (a full pass stopped
    it 4-65 ms in bench_agents' runs): the recall search's statement, built on every call, left
    ~560 objects a turn on PostgreSQL and SQLite, and fails this."""

    async def scenario() -> list[object]:
        async with open_async_service(database_url, async_threads=STALL_THREADS) as service:
            client = offline_async_client(RecallingModel())
            chat = AsyncMemoryChat(
                client, AsyncSessionMemory(service), model="m", recall=AsyncRecallTools(service)
            )
            user = unique("u")
            await concurrent_turns(chat, user, 5)  # warm: every statement of a turn built once
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector frees is kept in gc.garbage
            try:
                await concurrent_turns(chat, user, CYCLE_TURNS)
                gc.collect()
                return list(gc.garbage)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                await client.close()

    garbage = asyncio.run(scenario())
    kinds = collections.Counter(type(o).__qualname__ for o in garbage).most_common(8)
    assert len(garbage) < CYCLE_TURNS, f"{len(garbage)} objects in cycles after {CYCLE_TURNS} turns: {kinds}"


async def iterations(counted: list[int]) -> None:
    """Count the event loop's iterations in `counted[0]`: a callback that schedules itself again
    runs once in each (until the task awaiting this is cancelled)."""
    loop = asyncio.get_running_loop()
    handle: asyncio.Handle | None = None

    def tick() -> None:
        nonlocal handle
        counted[0] += 1
        handle = loop.call_soon(tick)

    tick()
    try:
        await asyncio.Event().wait()
    finally:
        assert handle is not None
        handle.cancel()


def test_model_calls_begin_one_per_loop_iteration_in_the_order_they_asked():
    async def scenario() -> list[tuple[int, int]]:
        counted = [0]
        counting = asyncio.create_task(iterations(counted))
        await asyncio.sleep(0)
        began: list[tuple[int, int]] = []

        async def call(number: int) -> None:
            await take_turn()
            began.append((number, counted[0]))

        await asyncio.gather(*(call(n) for n in range(20)))
        counting.cancel()
        return began

    began = asyncio.run(scenario())
    assert [number for number, _ in began] == list(range(20))
    steps = [iteration for _, iteration in began]
    assert all(later > earlier for earlier, later in itertools.pairwise(steps)), steps


def test_a_call_with_none_waiting_begins_at_once_and_a_cancelled_one_holds_up_nobody():
    async def scenario() -> list[int]:
        begun: list[int] = []
        first = take_turn()
        with pytest.raises(StopIteration):  # it never suspends: no step of the loop lost
            first.send(None)

        async def call(number: int) -> None:
            await take_turn()
            begun.append(number)

        tasks = [asyncio.create_task(call(n)) for n in range(3)]
        await asyncio.sleep(0)  # all three wait behind the first call
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return begun

    assert asyncio.run(scenario()) == [0, 2]


def test_a_closed_loops_queue_of_calls_goes_with_the_loop():
    async def call() -> weakref.ref[asyncio.AbstractEventLoop]:
        await take_turn()
        await take_turn()  # this one waited in the loop's queue
        return weakref.ref(asyncio.get_running_loop())

    closed = asyncio.run(call())
    gc.collect()
    assert closed() is None


@pytest.fixture
def server():
    with OfflineServer() as running:
        yield running


def azure(base_url: str, kind: type[Any]) -> Any:
    """Azure OpenAI's client as an application configures it, its endpoint the offline server."""
    return kind(
        azure_endpoint=base_url.removesuffix("/v1"),
        azure_deployment="gpt-4o",
        api_key="offline",
        api_version="2024-10-21",
        max_retries=0,
    )


def test_memory_chat_takes_azure_openai_and_a_bare_completions_object(server):
    with open_service("memory://") as service:
        for client in (
            azure(server.base_url, openai.AzureOpenAI),
            bare(offline_client([Reply.text("bare reply")])),
        ):
            conversation = unique("c")
            chat = MemoryChat(client, SessionMemory(service), model="gpt-4o")
            completion = chat.complete(conversation, [UserMessage("hello")], user_id="u")
            text = completion.choices[0].message.content
            assert service.get_messages(conversation) == [UserMessage("hello"), AssistantMessage(text)]
            streamed = chat.complete(conversation, [UserMessage("again")], user_id="u", stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
            assert len(service.get_messages(conversation)) == 4


def test_async_memory_chat_takes_azure_openai_and_a_bare_completions_object(server):
    async def scenario() -> None:
        async with open_async_service("memory://") as service:
            for client in (
                azure(server.base_url, openai.AsyncAzureOpenAI),
                bare(offline_async_client([Reply.text("bare reply")]), asynchronous=True),
            ):
                conversation = unique("c")
                chat = AsyncMemoryChat(client, AsyncSessionMemory(service), model="gpt-4o")
                completion = await chat.complete(conversation, [UserMessage("hello")], user_id="u")
                text = completion.choices[0].message.content
                stored = await service.get_messages(conversation)
                assert stored == [UserMessage("hello"), AssistantMessage(text)]
                streamed = await chat.complete(conversation, [UserMessage("again")], user_id="u", stream=True)
                assert "".join([c.choices[0].delta.content or "" async for c in streamed if c.choices])
                assert len(await service.get_messages(conversation)) == 4

    asyncio.run(scenario())


def bare(client: Any, *, asynchronous: bool = False) -> Any:
    """An object with nothing but `chat.completions.create`, its stream a plain (async) iterator
    with no context manager: a hand-written client or another SDK's shim."""
    create = client.chat.completions.create

    if asynchronous:

        async def create_async(**kwargs: Any) -> Any:
            answer = await create(**kwargs)
            if not kwargs.get("stream"):
                return answer

            async def chunks() -> Any:
                async with answer as opened:
                    async for chunk in opened:
                        yield chunk

            return chunks()

        return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create_async)))

    def create_sync(**kwargs: Any) -> Any:
        answer = create(**kwargs)
        if not kwargs.get("stream"):
            return answer

        def chunks() -> Any:
            with answer as opened:
                yield from opened

        return chunks()

    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create_sync)))
