"""`LedgerChatMessageHistory` behaves as langchain-postgres' `PostgresChatMessageHistory` (the same
random sequences of add, clear and read give the same messages, synchronously and asynchronously),
works under `RunnableWithMessageHistory`, keeps what `clear()` forgets in the ledger, and keeps each
user's history to that user; on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_postgres import PostgresChatMessageHistory
from sessionledger.domain import EventFilter
from sessionledger.domain.compaction import SlidingWindowStrategy, TurnCountTrigger
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import SessionService, open_async_service
from sessionledger.infrastructure.audit.verify import verify
from sessionledger.infrastructure.langchain import LedgerChatMessageHistory

from tests.integration.server_side import admin_sql

TABLE = "langchain_history"
OPERATIONS = 40


def _text(rng: random.Random) -> str:
    return rng.choice(["", "hello", "Paris weather?", "ünïcode ✓", "x" * rng.randint(1, 40), "line\nbreak"])


def _content(rng: random.Random) -> Any:
    if rng.random() < 0.7:
        return _text(rng)
    return [
        rng.choice(
            [{"type": "text", "text": _text(rng)}, _text(rng), {"type": "image_url", "image_url": "u"}]
        )
        for _ in range(rng.randint(0, 3))
    ]


def _kwargs(rng: random.Random) -> dict[str, Any]:
    return rng.choice([{}, {"k": rng.randint(-5, 5)}, {"nested": {"a": [1, 2.5, None, True]}}])


def random_message(rng: random.Random) -> BaseMessage:
    common: dict[str, Any] = {
        "content": _content(rng),
        "additional_kwargs": _kwargs(rng),
        "response_metadata": _kwargs(rng),
        "id": rng.choice([None, str(uuid.uuid4())]),
    }
    kind = rng.randrange(7)
    if kind == 0:
        return HumanMessage(**common, name=rng.choice([None, "ann"]))
    if kind == 1:
        return SystemMessage(**common)
    if kind in (2, 3):
        calls = [
            {"name": "weather", "args": {"city": _text(rng)}, "id": f"call-{rng.randint(0, 99)}"}
            for _ in range(rng.randint(0, 2))
        ]
        usage = rng.choice([None, {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}])
        cls = AIMessage if kind == 2 else AIMessageChunk
        return cls(**common, tool_calls=calls, usage_metadata=usage)
    if kind == 4:
        return ToolMessage(
            **common,
            tool_call_id=f"call-{rng.randint(0, 99)}",
            artifact=rng.choice([None, {"rows": [1, 2]}]),
            status=rng.choice(["success", "error"]),
        )
    if kind == 5:
        return FunctionMessage(**common, name="legacy")
    return ChatMessage(**common, role=rng.choice(["user", "assistant", "critic"]))


@pytest.fixture
def peer_connection(pg_url: str) -> Iterator[str]:
    """A fresh `sl_*` database with langchain-postgres' table in it (dropped afterwards)."""
    url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(url) as connection:
        PostgresChatMessageHistory.create_tables(connection, TABLE)
    yield url


def _operations(seed: int) -> list[tuple[str, int, list[BaseMessage]]]:
    """(operation, which history, messages) triples over three histories."""
    rng = random.Random(seed)
    operations = []
    for _ in range(OPERATIONS):
        operation = rng.choices(["add", "read", "clear"], weights=[6, 3, 1])[0]
        messages = [random_message(rng) for _ in range(rng.randint(1, 3))] if operation == "add" else []
        operations.append((operation, rng.randrange(3), messages))
    return operations


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_same_sequences_give_what_postgres_chat_message_history_gives(
    service: SessionService, peer_connection: str, seed: int
) -> None:
    session_ids = [str(uuid.uuid4()) for _ in range(3)]
    with psycopg.connect(peer_connection) as connection:
        peers = [PostgresChatMessageHistory(TABLE, sid, sync_connection=connection) for sid in session_ids]
        ours = [LedgerChatMessageHistory(sid, service=service, user_id="u") for sid in session_ids]
        for step, (operation, which, messages) in enumerate(_operations(seed)):
            if operation == "add":
                peers[which].add_messages(messages)
                ours[which].add_messages(messages)
            elif operation == "clear":
                peers[which].clear()
                ours[which].clear()
            assert ours[which].messages == peers[which].messages, f"step {step}: {operation}"
        for peer, mine in zip(peers, ours, strict=True):
            assert mine.messages == peer.messages


@pytest.mark.parametrize("seed", [4, 5])
def test_the_same_sequences_asynchronously_give_what_the_peer_gives(
    database_url: str, peer_connection: str, seed: int
) -> None:
    async def scenario() -> None:
        session_ids = [str(uuid.uuid4()) for _ in range(3)]
        async with (
            await psycopg.AsyncConnection.connect(peer_connection) as connection,
            open_async_service(database_url) as service,
        ):
            peers = [
                PostgresChatMessageHistory(TABLE, sid, async_connection=connection) for sid in session_ids
            ]
            ours = [LedgerChatMessageHistory(sid, service=service, user_id="u") for sid in session_ids]
            for step, (operation, which, messages) in enumerate(_operations(seed)):
                if operation == "add":
                    await peers[which].aadd_messages(messages)
                    await ours[which].aadd_messages(messages)
                elif operation == "clear":
                    await peers[which].aclear()
                    await ours[which].aclear()
                expected = await peers[which].aget_messages()
                assert await ours[which].aget_messages() == expected, f"step {step}: {operation}"

    asyncio.run(scenario())


def test_clear_forgets_the_window_and_the_ledger_keeps_the_messages(
    service: SessionService, unique: Callable[[str], str]
) -> None:
    lc_clear = unique("lc-clear")
    history = LedgerChatMessageHistory(lc_clear, service=service, user_id="u")
    history.add_messages([HumanMessage("my cat is called Mistral"), AIMessage("A fine name.")])
    history.clear()
    assert history.messages == []
    events = service.get_events(lc_clear)
    assert [(event.message.text, event.archived) for event in events] == [
        ("my cat is called Mistral", True),
        ("A fine name.", True),
    ]
    found = service.get_events(lc_clear, EventFilter.keyword_search("mistral", 0, 10))
    assert [event.message.text for event in found] == ["my cat is called Mistral"]
    compactions = [record for record in service.records(lc_clear) if record.kind is Kind.COMPACTION]
    assert [record.payload["source"] for record in compactions] == ["ClearSession"]
    assert service.replay(lc_clear).window == ()
    assert verify(service, lc_clear).ok
    history.add_message(HumanMessage("again"))
    assert history.messages == [HumanMessage("again")]
    history.clear()
    history.clear()  # an empty window: nothing to record
    assert len([r for r in service.records(lc_clear) if r.kind is Kind.COMPACTION]) == 2


def test_clear_of_a_history_never_written_is_a_no_op(
    service: SessionService, unique: Callable[[str], str]
) -> None:
    lc_never = unique("lc-never")
    history = LedgerChatMessageHistory(lc_never, service=service)
    history.clear()
    assert history.messages == []
    assert service.get_session(lc_never) is None


def test_the_first_write_creates_the_session_for_the_user(
    service: SessionService, unique: Callable[[str], str]
) -> None:
    lc_default = unique("lc-default")
    lc_owned = unique("lc-owned")
    LedgerChatMessageHistory(lc_default, service=service).add_message(HumanMessage("hi"))
    LedgerChatMessageHistory(lc_owned, service=service, user_id="ann").add_message(HumanMessage("hi"))
    default, owned = service.get_session(lc_default), service.get_session(lc_owned)
    assert default is not None and owned is not None
    assert (default.user_id, default.app_name) == ("langchain", "langchain")
    assert (owned.user_id, owned.app_name) == ("ann", "langchain")


@pytest.mark.parametrize("batch", [1, 2], ids=["one message", "two messages"])
def test_another_users_history_is_neither_readable_nor_writable(
    service: SessionService, batch: int, unique: Callable[[str], str]
) -> None:
    lc_private = unique("lc-private")
    owner = LedgerChatMessageHistory(lc_private, service=service, user_id="ann")
    owner.add_messages([HumanMessage("secret"), AIMessage("kept")])
    before = service.records(lc_private)
    intruder = LedgerChatMessageHistory(lc_private, service=service, user_id="bob")
    assert intruder.messages == []
    with pytest.raises(ValueError, match="does not belong"):
        intruder.add_messages([HumanMessage("mine now")] * batch)
    with pytest.raises(ValueError, match="does not belong"):
        intruder.clear()
    with pytest.raises(ValueError, match="does not belong"):
        asyncio.run(intruder.aadd_messages([HumanMessage("async")] * batch))
    with pytest.raises(ValueError, match="does not belong"):
        asyncio.run(intruder.aclear())
    assert asyncio.run(intruder.aget_messages()) == []
    assert service.records(lc_private) == before
    assert owner.messages == [HumanMessage("secret"), AIMessage("kept")]


def test_a_history_on_a_database_url_opens_and_closes_its_own_ledger(database_url: str) -> None:
    session_id = f"lc-{uuid.uuid4().hex}"
    with LedgerChatMessageHistory(session_id, database_url, user_id="u") as history:
        history.add_messages([HumanMessage("one"), AIMessage("two")])
        assert history.messages == [HumanMessage("one"), AIMessage("two")]

        async def more() -> list[BaseMessage]:
            await history.aadd_messages([HumanMessage("three")])
            await history.aadd_messages([AIMessage("four")])  # the loop's one-event append
            return await history.aget_messages()

        assert [m.content for m in asyncio.run(more())] == ["one", "two", "three", "four"]
    with pytest.raises(RuntimeError, match="closed"):
        history.add_message(HumanMessage("after close"))
    if database_url != "memory://":
        with LedgerChatMessageHistory(session_id, database_url, user_id="u") as again:
            assert [m.content for m in again.messages] == ["one", "two", "three", "four"]


def test_histories_on_one_ledger_share_one_service_which_the_last_closes(database_url: str) -> None:
    session_id = f"lc-{uuid.uuid4().hex}"
    first = LedgerChatMessageHistory(session_id, database_url, user_id="u")
    second = LedgerChatMessageHistory(session_id, database_url, user_id="u")
    assert (first.service is second.service) is (database_url != "memory://")  # memory: each its own
    first.add_messages([HumanMessage("one")])
    first.close()
    first.close()  # twice is harmless, and releases once
    with pytest.raises(RuntimeError, match="closed"):
        first.add_messages([HumanMessage("after close")])
    second.add_messages([AIMessage("two")])  # the service stays open for the other history
    if database_url != "memory://":
        assert [m.content for m in second.messages] == ["one", "two"]
    asyncio.run(second.aclose())
    with pytest.raises(RuntimeError, match="closed"):
        second.service.synchronous()  # the last history closed it
    with LedgerChatMessageHistory(session_id, database_url, user_id="u") as again:  # a new one
        assert again.service is not second.service
        if database_url != "memory://":
            assert [m.content for m in again.messages] == ["one", "two"]


def test_histories_made_per_call_hold_no_connections_of_their_own(pg_url: str) -> None:
    """As `RunnableWithMessageHistory` uses them: a history made from the URL for each call, never
    closed. Each opened an engine and kept its connections (two a call: the server's connections
    ran out after fifty calls); they share one now, whose connections are at most its pool's (the
    kept one, those of writes that overlapped, the keyword indexer's: 2 to 4 here)."""
    made: list[LedgerChatMessageHistory] = []

    def history(session_id: str) -> LedgerChatMessageHistory:
        made.append(LedgerChatMessageHistory(session_id, pg_url, user_id="u"))
        return made[-1]

    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    chain = RunnableWithMessageHistory(
        prompt | FakeListChatModel(responses=["yes"]),
        history,
        input_messages_key="question",
        history_messages_key="history",
    )
    try:
        for n in range(20):
            config: Any = {"configurable": {"session_id": f"lc-call-{n % 4}"}}
            chain.invoke({"question": f"question {n}"}, config=config)
        ((held,),) = admin_sql(
            pg_url,
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        assert len({id(h.service) for h in made}) == 1
        assert held <= made[0].service.settings.pool_size, f"{held} connections for 20 calls"
    finally:
        for made_history in made:
            made_history.close()


def test_a_url_and_a_service_together_are_refused(service: SessionService) -> None:
    with pytest.raises(ValueError, match="not both"):
        LedgerChatMessageHistory("s", "memory://", service=service)
    with pytest.raises(ValueError, match="session_id"):
        LedgerChatMessageHistory("", service=service)


def _chain(service: SessionService, answers: list[str]) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    return RunnableWithMessageHistory(
        prompt | FakeListChatModel(responses=answers),
        lambda session_id: LedgerChatMessageHistory(session_id, service=service, user_id="u"),
        input_messages_key="question",
        history_messages_key="history",
    )


def test_it_works_under_runnable_with_message_history(
    service: SessionService, unique: Callable[[str], str]
) -> None:
    lc_runnable_async = unique("lc-runnable-async")
    lc_runnable = unique("lc-runnable")
    chain = _chain(service, ["Hi Ann.", "Your name is Ann."])
    config: Any = {"configurable": {"session_id": lc_runnable}}
    assert chain.invoke({"question": "I am Ann."}, config=config).content == "Hi Ann."
    assert chain.invoke({"question": "Who am I?"}, config=config).content == "Your name is Ann."
    stored = LedgerChatMessageHistory(lc_runnable, service=service, user_id="u").messages
    assert [(type(m), m.content) for m in stored] == [
        (HumanMessage, "I am Ann."),
        (AIMessage, "Hi Ann."),
        (HumanMessage, "Who am I?"),
        (AIMessage, "Your name is Ann."),
    ]

    async def asynchronously() -> None:
        config: Any = {"configurable": {"session_id": lc_runnable_async}}
        chain = _chain(service, ["One.", "Two."])
        await chain.ainvoke({"question": "first"}, config=config)
        await chain.ainvoke({"question": "second"}, config=config)

    asyncio.run(asynchronously())
    stored = LedgerChatMessageHistory(lc_runnable_async, service=service, user_id="u").messages
    assert [m.content for m in stored] == ["first", "One.", "second", "Two."]


def test_a_compacted_history_reads_as_the_window_the_compaction_kept(
    service: SessionService, unique: Callable[[str], str]
) -> None:
    session_id = unique("lc-compacted")
    history = LedgerChatMessageHistory(session_id, service=service, user_id="u")
    written: list[BaseMessage] = []
    for turn in range(4):
        call = {"name": "lookup", "args": {"turn": turn}, "id": f"call-{turn}"}
        written += [
            HumanMessage(f"question {turn}"),
            AIMessage("", tool_calls=[call], id=f"ai-{turn}"),
            ToolMessage(f"result {turn}", tool_call_id=f"call-{turn}", artifact={"turn": turn}),
            AIMessage(
                f"answer {turn}", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
            ),
        ]
    history.add_messages(written)
    result = service.compact(session_id, TurnCountTrigger(1), SlidingWindowStrategy(max_events=6))
    assert result.archived
    kept = history.messages
    assert kept == written[len(written) - len(kept) :]
    assert isinstance(kept[0], HumanMessage)  # the window is cut at a turn, never inside a tool call
    found = service.get_events(session_id, EventFilter.keyword_search("question 0", 0, 10))
    assert [event.archived for event in found] == [True]
