"""What agent memory adds, on PostgreSQL.

- a turn through `SessionMemory` (`before`, a fake model call that answers at once, `after`) on a
  1,000-event session, against the raw reads and writes such a turn needs, measured in the same run
  on a twin session: one window read (`get_events`, active) and two appends (`append_event`);
- `RecallTools.conversation_search` on a 100,000-event session against the same search on a
  1,000-event one: a keyword that is common (found on the first page at once), one of middling
  frequency, a rare one, one no event holds (both through the keyword index) and a blank query
  (page 0 of everything); before them, the keyword index's catch-up after the loads;
- `RecallTools.cross_session_search` over a user's 50,000 events in 100 sessions against the
  same over 500 events in 100 sessions, for a common, a rare and an absent keyword;
- the event loop's largest stall while 100 `AsyncMemoryChat` turns run at once (each: the memory's
  read and write, the model asking for a recall search, the search answered and stored, the model's
  answer), against the offline model, after a warm-up (the first calls' imports and connections are
  start-up's), on an async service with a pool of 2 threads on PostgreSQL and on SQLite, and with
  the default 5 on PostgreSQL; beside them the stall of the same 200 model calls made at once by
  the client alone (the `openai` client's own work on the loop) and of a bare loop with the same
  ticker (what the machine's load costs any loop).
Sessions hold real ShareGPT messages, loaded through the batch ingest path. Cases alternate round
by round; figures are medians.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import psycopg
from sessionledger.domain import AssistantMessage, EventFilter, Message, SessionEvent, UserMessage
from sessionledger.domain.messages import ToolCall, ToolResponse, ToolResponseMessage, to_openai
from sessionledger.infrastructure import SessionService, open_async_service, open_service
from sessionledger.infrastructure.agents import (
    AsyncMemoryChat,
    AsyncRecallTools,
    AsyncSessionMemory,
    RecallTools,
    SessionMemory,
)
from sessionledger.infrastructure.offline_model import (
    OfflineModel,
    Reply,
    Request,
    offline_async_client,
    tool_call,
)

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating, interleaved, largest_stall, timed

WINDOW_EVENTS = 1_000
TURNS_PER_ROUND = 20
TURN_ROUNDS = 7
SMALL, LARGE = 1_000, 100_000
SEARCH_ROUNDS = 7
TURN_TARGET = 1.3
SEARCH_TARGET = 1.5
QUERIES = {
    "common keyword 'the'": "the",
    "middling keyword 'python'": "python",
    "rare keyword 'quantum'": "quantum",
    "absent keyword": "zqxjkv-nowhere",
    "blank query": "",
}
"""'the' is in three messages of four, 'python' in one of twenty, 'quantum' in 7 of the 5,000 the
sessions cycle through (140 events of the 100,000, 3 of the 1,000), the absent keyword in none."""
CROSS_SESSIONS, CROSS_SMALL, CROSS_LARGE = 100, 500, 50_000
CROSS_TARGET = 3.0
CROSS_QUERIES = {
    "common keyword 'the'": "the",
    "rare keyword 'quantum'": "quantum",
    "absent keyword": "zqxjkv-nowhere",
}
CONCURRENT_TURNS, STALL_ROUNDS, IDLE_SECONDS = 100, 5, 1.0
STALL_TARGET = 0.010
STALL_THREADS = 1
"""The async service's threads for an agent's event loop (`async_threads=1`, beside the default
pool of 5 connections): each thread running Python is one more for the loop to wait on for the
GIL. Two threads (`pool_size=2`) and the default five are measured beside it."""
SEARCH_CALL = tool_call("conversation_search", {"innerThought": "recall", "query": "tea"}, id="call_tea")


def run() -> list[Row]:
    with fresh_postgres() as url, open_service(url) as service:
        rows = _turns(service, url)
        rows += _searches(service, url)
        rows += _stalls(url)
    return rows


class RecallingModel(OfflineModel):
    """The offline model as a recalling agent's: asks to search the conversation for tea, then
    answers once the search's result is in the request."""

    def next_reply(self, request: Request) -> Reply:
        if request.body["messages"][-1]["role"] == "tool":
            return Reply.text("tea it is")
        return Reply.calling(SEARCH_CALL)


async def concurrent_turns(chat: AsyncMemoryChat, user_id: str, turns: int = CONCURRENT_TURNS) -> float:
    """The event loop's largest stall (s) while `turns` turns of `chat` run at once, each in a
    conversation of its own."""

    async def turn(number: int) -> None:
        await chat.complete(f"turn-{uuid.uuid4().hex}", [UserMessage(f"tea {number}?")], user_id=user_id)

    return await largest_stall(lambda: asyncio.gather(*(turn(n) for n in range(turns))))


async def client_alone(client: openai.AsyncOpenAI, tools: list[dict[str, Any]]) -> float:
    """The same model calls as `concurrent_turns`'s, made by the client alone."""
    question = UserMessage("tea?")
    call = AssistantMessage(None, [ToolCall(SEARCH_CALL.id, SEARCH_CALL.name, SEARCH_CALL.arguments)])
    results = ToolResponseMessage([ToolResponse(SEARCH_CALL.id, SEARCH_CALL.name, "No results found.")])
    first, second = to_openai([question]), to_openai([question, call, results])

    async def calls() -> None:
        await client.chat.completions.create(model="m", messages=first, tools=tools)  # type: ignore[arg-type]
        await client.chat.completions.create(model="m", messages=second, tools=tools)  # type: ignore[arg-type]

    return await largest_stall(lambda: asyncio.gather(*(calls() for _ in range(CONCURRENT_TURNS))))


def bare_loop() -> Awaitable[float]:
    """The largest stall of a loop with nothing but the ticker, for `IDLE_SECONDS`: the machine's
    share of every other figure."""
    return largest_stall(lambda: asyncio.sleep(IDLE_SECONDS))


def _stalls(url: str) -> list[Row]:
    with tempfile.TemporaryDirectory() as folder, asyncio.Runner() as loop:
        services = {
            "postgres": open_async_service(url, async_threads=STALL_THREADS),
            "sqlite": open_async_service(f"sqlite:///{folder}/stall.db", async_threads=STALL_THREADS),
            "two": open_async_service(url, pool_size=2),
            "default": open_async_service(url),
        }
        client = offline_async_client(RecallingModel())
        chats = {
            name: AsyncMemoryChat(
                client, AsyncSessionMemory(service), model="m", recall=AsyncRecallTools(service)
            )
            for name, service in services.items()
        }
        definitions = AsyncRecallTools(services["postgres"]).definitions()
        stalls: dict[str, list[float]] = {name: [] for name in [*chats, "client", "idle"]}

        def measured(name: str, work: Callable[[], Awaitable[float]]) -> float:
            stalls[name].append(loop.run(work()))
            return stalls[name][-1]

        cases = {
            name: lambda name=name: measured(name, lambda: concurrent_turns(chats[name], "bench"))
            for name in chats
        }
        cases["client"] = lambda: measured("client", lambda: client_alone(client, definitions))
        cases["idle"] = lambda: measured("idle", bare_loop)
        try:
            for case in cases.values():  # warm: connections, the client's first calls
                case()
            gc.freeze()  # as bench_adapters_openai: start-up's objects leave the collector's full passes
            for measures in stalls.values():
                measures.clear()
            alternating(STALL_ROUNDS, cases)
        finally:
            loop.run(client.close())
            for service in services.values():
                loop.run(service.aclose())
    shown = {
        name: f"{max(measures) * 1000:.1f} ms; {statistics.median(measures) * 1000:.1f} ms"
        for name, measures in stalls.items()
    }
    rows = [
        Row(
            f"AsyncMemoryChat, {CONCURRENT_TURNS} concurrent turns, async_threads={STALL_THREADS}, {label}: "
            "event loop's largest stall (worst round; median)",
            shown[name],
            f"bare loop {shown['idle']}; client alone {shown['client']}",
            None,
            f"< {STALL_TARGET * 1000:.0f} ms",
            max(stalls[name]) < STALL_TARGET,
        )
        for name, label in (("postgres", "PostgreSQL"), ("sqlite", "SQLite"))
    ]
    return [
        *rows,
        *(
            Row(
                f"  the same on PostgreSQL with {label}",
                shown[name],
                f"client alone, the same calls at once {shown['client']}",
                None,
                "report",
            )
            for name, label in (
                ("two", "pool_size=2 (2 threads)"),
                ("default", "the default pool (5 threads)"),
            )
        ),
    ]


def _analyzed(url: str) -> None:
    """Fresh planner statistics after a bulk load, as autovacuum would soon gather them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def _turns(service: SessionService, url: str) -> list[Row]:
    memory = SessionMemory(service)
    raw_session = payloads.session_with(service, WINDOW_EVENTS)
    memory_session = payloads.session_with(service, WINDOW_EVENTS)
    _analyzed(url)
    owner = service.get_session(memory_session).user_id  # type: ignore[union-attr]  # just created

    def raw_turns() -> float:
        return sum(timed(lambda: _raw_turn(service, raw_session)) for _ in range(TURNS_PER_ROUND))

    def memory_turns() -> float:
        return sum(timed(lambda: _memory_turn(memory, memory_session, owner)) for _ in range(TURNS_PER_ROUND))

    medians = alternating(TURN_ROUNDS, {"raw": raw_turns, "memory": memory_turns})
    raw, added = medians["raw"] / TURNS_PER_ROUND, medians["memory"] / TURNS_PER_ROUND
    ratio = added / raw
    return [
        Row(
            f"raw turn: window read + 2 appends, {WINDOW_EVENTS:,}-event session",
            report.duration(raw),
        ),
        Row(
            "SessionMemory.before + after around an instant model call",
            report.duration(added),
            f"raw turn {report.duration(raw)}",
            ratio,
            f"<= {TURN_TARGET}x",
            ratio <= TURN_TARGET,
        ),
    ]


def _raw_turn(service: SessionService, session_id: str) -> None:
    window = service.get_events(session_id, EventFilter.active())
    question = UserMessage(f"question after {len(window)} events")
    service.append_event(SessionEvent(session_id=session_id, message=question))
    service.append_event(SessionEvent(session_id=session_id, message=_model([question])))


def _memory_turn(memory: SessionMemory, session_id: str, user_id: str) -> None:
    prompt = memory.before(session_id, [UserMessage("question")], user_id=user_id)
    memory.after(session_id, [_model(prompt)], user_id=user_id)


def _model(prompt: list[Message]) -> Message:
    """A model that answers at once."""
    return AssistantMessage(f"an answer to {len(prompt)} messages")


def _searches(service: SessionService, url: str) -> list[Row]:
    tools = RecallTools(service)
    small = payloads.session_with(service, SMALL)
    large = payloads.session_with(service, LARGE)
    rows = [_index_catch_up(service)]
    _analyzed(url)
    for label, query in QUERIES.items():
        medians = interleaved(
            SEARCH_ROUNDS,
            {
                "small": lambda q=query: tools.conversation_search(small, q),
                "large": lambda q=query: tools.conversation_search(large, q),
            },
        )
        ratio = medians["large"] / medians["small"]
        rows.append(
            Row(
                f"conversation_search, {label}, {LARGE:,} vs {SMALL:,} events",
                report.duration(medians["large"]),
                f"{SMALL:,} events {report.duration(medians['small'])}",
                ratio,
                f"<= {SEARCH_TARGET}x",
                ratio <= SEARCH_TARGET,
            )
        )
    return rows + _cross_session_searches(service, url)


def _index_catch_up(service: SessionService) -> Row:
    """The keyword index filled behind the writes (PostgreSQL): the rows its indexer thread had not
    reached when the loads ended, caught up at once, and their rate; no target (its cost is the
    database's, off the write path)."""
    start = time.perf_counter()
    indexed = service.ledger.index_text()  # type: ignore[attr-defined]  # SqlLedger's
    seconds = time.perf_counter() - start
    return Row(
        "keyword index: rows the indexer had not reached after the loads, caught up",
        report.duration(seconds),
        f"{indexed:,} rows, {report.rate(indexed / seconds if seconds else 0.0, 'rows')}",
        None,
        "-",
        None,
    )


def _user_with(service: SessionService, sessions: int, events: int) -> str:
    """A new user with `sessions` sessions of `events` ShareGPT messages each (different ones)."""
    user_id = f"bench-{uuid.uuid4().hex[:8]}"
    found = payloads.cycled(sessions * events)
    for n in range(sessions):
        session_id = service.create_session(user_id, app_name="bench").id
        batch = found[n * events : (n + 1) * events]
        for start in range(0, events, payloads.LOAD_BATCH):
            chunk = batch[start : start + payloads.LOAD_BATCH]
            service.ingest([SessionEvent(session_id=session_id, message=m) for m in chunk])
    return user_id


def _cross_session_searches(service: SessionService, url: str) -> list[Row]:
    tools = RecallTools(service)
    small = _user_with(service, CROSS_SESSIONS, CROSS_SMALL // CROSS_SESSIONS)
    large = _user_with(service, CROSS_SESSIONS, CROSS_LARGE // CROSS_SESSIONS)
    service.ledger.index_text()  # type: ignore[attr-defined]
    _analyzed(url)
    rows: list[Row] = []
    for label, query in CROSS_QUERIES.items():
        medians = interleaved(
            SEARCH_ROUNDS,
            {
                "small": lambda q=query: tools.cross_session_search(small, q),
                "large": lambda q=query: tools.cross_session_search(large, q),
            },
        )
        ratio = medians["large"] / medians["small"]
        rows.append(
            Row(
                f"cross_session_search, {label}, {CROSS_LARGE:,} vs {CROSS_SMALL:,} events"
                f" in {CROSS_SESSIONS} sessions",
                report.duration(medians["large"]),
                f"{CROSS_SMALL:,} events {report.duration(medians['small'])}",
                ratio,
                f"< {CROSS_TARGET}x",
                ratio < CROSS_TARGET,
            )
        )
    return rows


if __name__ == "__main__":
    report.main(run)
