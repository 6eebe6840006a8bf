"""LedgerSession behaves as the openai-agents SDK's own sessions do (limits, pop, clear, settings,
isolation, exact items), against the SDK's SQLiteSession operation by operation, on memory, SQLite
and PostgreSQL; concurrent writers lose nothing; pop and clear stay in the audit trail."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agents import SQLiteSession
from agents.memory import Session, SessionSettings
from sessionledger.domain import EventFilter
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.audit.verify import verify
from sessionledger.infrastructure.openai_agents import LedgerSession


def unique(prefix: str = "s") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(scenario())  # type: ignore[arg-type]  # a coroutine in practice


def texts(items: list[Any]) -> list[Any]:
    return [item.get("content") for item in items]


def messages(*contents: str) -> list[Any]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]


EVERY_ITEM_TYPE: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "developer", "content": "Answer briefly."},
    {"role": "system", "content": "You are terse."},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Describe this"},
            {"type": "input_image", "image_url": "https://example.invalid/a.png", "detail": "auto"},
            {"type": "input_file", "file_id": "file_1", "filename": "a.pdf"},
        ],
    },
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Need the forecast."}],
        "encrypted_content": "gAAAAB...",
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "22 C and sunny"},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "a list output"}],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "It is 22 C.", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "No more."},
        ],
    },
    {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "x"},
    },
    {"id": "fs_1", "type": "file_search_call", "queries": ["q"], "status": "completed", "results": None},
    {
        "id": "cu_1",
        "type": "computer_call",
        "call_id": "cc_1",
        "action": {"type": "click", "button": "left", "x": 1, "y": 2},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "cc_1",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"},
    },
    {"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "iVBORw0KGgo="},
    {
        "id": "ci_1",
        "type": "code_interpreter_call",
        "code": "print(1)",
        "container_id": "cntr_1",
        "outputs": [{"type": "logs", "logs": "1"}],
        "status": "completed",
    },
    {
        "id": "ls_1",
        "type": "local_shell_call",
        "call_id": "lsc_1",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    {"type": "local_shell_call_output", "id": "lsc_1", "output": "README.md"},
    {
        "id": "ml_1",
        "type": "mcp_list_tools",
        "server_label": "docs",
        "tools": [{"name": "t", "input_schema": {}}],
    },
    {"id": "ma_1", "type": "mcp_approval_request", "server_label": "docs", "name": "t", "arguments": "{}"},
    {"type": "mcp_approval_response", "approval_request_id": "ma_1", "approve": True},
    {
        "id": "mc_1",
        "type": "mcp_call",
        "server_label": "docs",
        "name": "t",
        "arguments": "{}",
        "output": "ok",
    },
    {"id": "ct_1", "type": "custom_tool_call", "call_id": "ctc_1", "name": "grammar", "input": "x = 1"},
    {"type": "custom_tool_call_output", "call_id": "ctc_1", "output": "parsed"},
    {"type": "item_reference", "id": "msg_0"},
    {"id": "cmp_1", "type": "compaction", "encrypted_content": "opaque"},
    # what only the exact JSON text keeps: NUL, integers beyond 64 bits, floats, key order, nesting
    {"z": 1, "a": [1.5, -0.0, 1e300, 2**80, None, True], "role": "user", "content": "nul\x00inside"},
]


# --- the SDK's session behaviours, each on the three backends ------------------------------------


def test_items_round_trip_exactly(database_url: str) -> None:
    async def scenario() -> None:
        session = LedgerSession(unique(), database_url=database_url)
        try:
            await session.add_items(EVERY_ITEM_TYPE[:3])
            await session.add_items(EVERY_ITEM_TYPE[3:])
            items = await session.get_items()
            assert items == EVERY_ITEM_TYPE
            assert [json.dumps(item) for item in items] == [json.dumps(item) for item in EVERY_ITEM_TYPE]
        finally:
            await session.close()

    run(scenario)


def test_get_items_limits_and_session_settings(database_url: str) -> None:
    async def scenario() -> None:
        session = LedgerSession(unique(), database_url=database_url)
        limited = LedgerSession(session.session_id, database_url=database_url, session_settings={"limit": 3})
        try:
            assert isinstance(session, Session)
            assert session.session_settings == SessionSettings() and limited.session_settings is not None
            assert limited.session_settings.limit == 3
            assert await session.get_items() == []
            contents = [f"Message {i}" for i in range(6)]
            await session.add_items(messages(*contents))
            if database_url == "memory://":  # a memory ledger is its session's own
                await limited.add_items(messages(*contents))
            assert texts(await session.get_items()) == contents
            assert texts(await session.get_items(limit=2)) == contents[-2:]
            assert texts(await session.get_items(limit=4)) == contents[-4:]
            assert texts(await session.get_items(limit=10)) == contents
            assert await session.get_items(limit=0) == []
            assert texts(await session.get_items(limit=-1)) == contents
            assert texts(await limited.get_items()) == contents[-3:]
            assert texts(await limited.get_items(limit=2)) == contents[-2:]
        finally:
            await session.close()
            await limited.close()

    run(scenario)


def test_pop_item_takes_the_newest_until_none_is_left(database_url: str) -> None:
    async def scenario() -> None:
        session = LedgerSession(unique(), database_url=database_url)
        other = LedgerSession(unique(), database_url=database_url)
        try:
            assert await session.pop_item() is None
            await session.add_items(messages("Hello", "Hi there!", "How are you?"))
            await other.add_items(messages("untouched"))
            assert (await session.pop_item() or {}).get("content") == "How are you?"
            assert texts(await session.get_items()) == ["Hello", "Hi there!"]
            assert (await session.pop_item() or {}).get("content") == "Hi there!"
            assert (await session.pop_item() or {}).get("content") == "Hello"
            assert await session.pop_item() is None
            assert await session.get_items() == []
            assert texts(await other.get_items()) == ["untouched"]
            await session.add_items(messages("again"))
            assert texts(await session.get_items()) == ["again"]
        finally:
            await session.close()
            await other.close()

    run(scenario)


def test_clear_session_empties_the_window_and_the_session_goes_on(database_url: str) -> None:
    async def scenario() -> None:
        session = LedgerSession(unique(), database_url=database_url)
        try:
            await session.clear_session()  # an unknown session: nothing to do
            await session.add_items(
                messages("O'Reilly", "DROP TABLE sessions;", "Robert'); --", "こんにちは", "😊")
            )
            assert texts(await session.get_items()) == [
                "O'Reilly",
                "DROP TABLE sessions;",
                "Robert'); --",
                "こんにちは",
                "😊",
            ]
            await session.clear_session()
            assert await session.get_items() == []
            assert await session.pop_item() is None
            await session.add_items(messages("after"))
            assert texts(await session.get_items()) == ["after"]
        finally:
            await session.close()

    run(scenario)


def test_pop_and_clear_are_ledger_records_that_replay_and_verify_see(database_url: str) -> None:
    async def scenario() -> None:
        session = LedgerSession(unique(), database_url=database_url)
        try:
            await session.add_items(messages("a", "b", "c"))
            await session.pop_item()
            await session.clear_session()
            await session.add_items(messages("d"))
            service, session_id = session.service, session.session_id
            records = await service.records(session_id)
            assert [r.kind for r in records] == [Kind.CREATED, Kind.EVENT, Kind.EVENT, Kind.EVENT,
                                                 Kind.COMPACTION, Kind.COMPACTION, Kind.EVENT]  # fmt: skip
            everything = await service.get_events(session_id, EventFilter.all())
            assert [e.message.text for e in everything] == ["a", "b", "c", "d"]
            assert [e.archived for e in everything] == [True, True, True, False]
            projection = await service.replay(session_id, upto_version=3)
            assert [e.message.text for e in projection.window] == ["a", "b", "c"]
            assert (await service.run(lambda s: verify(s, session_id))).ok
        finally:
            await session.close()

    run(scenario)


def test_a_user_sees_and_writes_only_their_own_session(database_url: str) -> None:
    async def scenario() -> None:
        session_id = unique()
        alice = LedgerSession(session_id, database_url=database_url, user_id="alice")
        try:
            await alice.add_items(messages("secret"))
            if database_url == "memory://":
                return  # each memory session is its own ledger: nothing to share
            bob = LedgerSession(session_id, database_url=database_url, user_id="bob")
            try:
                assert await bob.get_items() == []
                with pytest.raises(ValueError):
                    await bob.add_items(messages("intrusion"))
                with pytest.raises(ValueError):
                    await bob.add_items(messages("one", "two"))
                with pytest.raises(ValueError):
                    await bob.pop_item()
                assert texts(await alice.get_items()) == ["secret"]
            finally:
                await bob.close()
        finally:
            await alice.close()

    run(scenario)


def test_a_closed_session_refuses_every_operation() -> None:
    async def scenario() -> None:
        session = LedgerSession(unique(), database_url="memory://")
        await session.close()
        await session.close()
        for call in (session.get_items(), session.add_items([]), session.pop_item(), session.clear_session()):
            with pytest.raises(RuntimeError):
                await call

    run(scenario)


def test_two_tasks_appending_to_one_session_at_once_lose_nothing(database_url: str) -> None:
    async def scenario() -> None:
        session_id = unique()
        first = LedgerSession(session_id, database_url=database_url)
        second = (
            first if database_url == "memory://" else LedgerSession(session_id, database_url=database_url)
        )

        async def writer(session: LedgerSession, name: str) -> None:
            for i in range(60):
                await session.add_items([{"role": "user", "content": f"{name}-{i}"}])

        try:
            await asyncio.gather(writer(first, "a"), writer(second, "b"))
            stored = texts(await first.get_items())
            assert sorted(stored) == sorted([f"a-{i}" for i in range(60)] + [f"b-{i}" for i in range(60)])
            assert [t for t in stored if t.startswith("a-")] == [f"a-{i}" for i in range(60)]
            pops = await asyncio.gather(*(first.pop_item() for _ in range(10)))
            assert len({json.dumps(p) for p in pops}) == 10  # ten pops took ten different items
            assert len(await first.get_items()) == 110
        finally:
            await first.close()
            if second is not first:
                await second.close()

    run(scenario)


# --- differential: the SDK's SQLiteSession and ours, the same random operations -------------------


def random_item(rng: random.Random, number: int) -> dict[str, Any]:
    return rng.choice(
        [
            {"role": rng.choice(["user", "assistant", "system"]), "content": f"text {number}"},
            {
                "type": "function_call",
                "call_id": f"c{number}",
                "name": "f",
                "arguments": json.dumps({"n": number}),
            },
            {"type": "function_call_output", "call_id": f"c{number}", "output": f"out {number}"},
            {
                "type": "reasoning",
                "id": f"r{number}",
                "summary": [{"type": "summary_text", "text": f"why {number}"}],
            },
            rng.choice(EVERY_ITEM_TYPE),
        ]
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_random_operations_same_results_as_the_sdk_sqlite_session(database_url: str, seed: int) -> None:
    rng = random.Random(seed)

    async def scenario() -> None:
        session_id = unique()
        peer = SQLiteSession(session_id)
        ours = LedgerSession(session_id, database_url=database_url)
        number = 0
        try:
            for step in range(80):
                operation = rng.choice(["add", "add", "add", "get", "get", "pop", "clear"])
                if operation == "add":
                    items = []
                    for _ in range(rng.choice([0, 1, 1, 2, 5])):
                        number += 1
                        items.append(random_item(rng, number))
                    assert await ours.add_items(items) == await peer.add_items(items)
                elif operation == "get":
                    limit = rng.choice([None, None, 0, 1, 3, 50, -1])
                    assert await ours.get_items(limit) == await peer.get_items(limit), (step, limit)
                elif operation == "pop":
                    assert await ours.pop_item() == await peer.pop_item(), step
                elif rng.random() < 0.3:  # clear less often than the rest, so histories grow
                    await ours.clear_session()
                    await peer.clear_session()
            assert await ours.get_items() == await peer.get_items()
        finally:
            peer.close()
            await ours.close()

    run(scenario)
