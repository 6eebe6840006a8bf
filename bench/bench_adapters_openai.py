"""The openai-agents adapter and the async service on PostgreSQL, against their peers in one run.

- `LedgerSession.add_items`, one item per call, against openai-agents' own `SQLAlchemySession`
  (the SDK's PostgreSQL session, on asyncpg as its docs configure it) on the same server, the same
  items: ShareGPT turns as the Runner stores them (a user's `{"content", "role"}` input, the
  model's output message with its `output_text` part);
- reading a 1,000-item session (`get_items()`) through each;
- `AsyncSessionService`: 100 coroutines appending to 100 sessions at once against the synchronous
  service appending from one client, and the event loop's largest stall meanwhile (a ticker
  coroutine that wakes every millisecond and records how late it woke), beside the same ticker's
  on an idle loop (what the machine's own load costs it).
Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from sessionledger.domain import Message, MessageType, UserMessage
from sessionledger.infrastructure import AsyncSessionService, SessionService, open_async_service, open_service
from sessionledger.infrastructure.openai_agents import LedgerSession

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating, largest_stall

ADD_ROUNDS, ADDS_PER_ROUND = 10, 100
READ_ITEMS, READ_ROUNDS = 1_000, 20
WRITERS, APPENDS_PER_WRITER, ASYNC_ROUNDS = 100, 5, 7
IDLE_SECONDS = 1.0


def run() -> list[Row]:
    with fresh_postgres() as url, asyncio.Runner() as loop:
        ledger_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
        peer_url = url.replace("postgresql://", "postgresql+asyncpg://", 1)
        return [*_adapter(loop, ledger_url, peer_url), *_async_service(loop, ledger_url)]


def _items(count: int) -> list[Any]:
    """ShareGPT turns as the Runner stores them: a user's input, the model's output message."""
    return [_item(number, message) for number, message in enumerate(payloads.cycled(count))]


def _item(number: int, message: Message) -> dict[str, Any]:
    text = message.text or ""
    if message.type is not MessageType.ASSISTANT:
        return {"content": text, "role": "user"}
    return {
        "id": f"msg_{number:08d}",
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


def _adapter(loop: asyncio.Runner, ledger_url: str, peer_url: str) -> list[Row]:
    ours = LedgerSession(f"bench-{uuid.uuid4().hex}", database_url=ledger_url)
    peer = SQLAlchemySession.from_url(f"bench-{uuid.uuid4().hex}", url=peer_url, create_tables=True)
    try:
        return [*_adds(loop, ours, peer), *_reads(loop, ours, peer)]
    finally:
        loop.run(ours.close())
        loop.run(peer.engine.dispose())


def _adds(loop: asyncio.Runner, ours: LedgerSession, peer: SQLAlchemySession) -> list[Row]:
    batches = {name: _rounds(_items(ADD_ROUNDS * ADDS_PER_ROUND)) for name in ("ours", "peer")}

    def adding(session: Any, name: str) -> Callable[[], float]:
        async def add_round() -> float:
            started = time.perf_counter()
            for item in next(batches[name]):
                await session.add_items([item])
            return time.perf_counter() - started

        return lambda: loop.run(add_round())

    cases = {"ours": adding(ours, "ours"), "peer": adding(peer, "peer")}
    for case in cases.values():  # warm up: connections, prepared statements, the tables
        case()
    medians = alternating(ADD_ROUNDS - 1, cases)
    rates = {name: ADDS_PER_ROUND / seconds for name, seconds in medians.items()}
    ratio = rates["ours"] / rates["peer"]
    return [
        Row(
            "LedgerSession.add_items, one item per call",
            report.rate(rates["ours"], "items"),
            f"SQLAlchemySession (asyncpg) {report.rate(rates['peer'], 'items')}",
            ratio,
            ">= 3x",
            ratio >= 3,
        )
    ]


def _reads(loop: asyncio.Runner, ours: LedgerSession, peer: SQLAlchemySession) -> list[Row]:
    ours = LedgerSession(f"bench-read-{uuid.uuid4().hex}", database_url=ours.service.settings.database_url)
    peer = SQLAlchemySession(f"bench-read-{uuid.uuid4().hex}", engine=peer.engine)
    items = _items(READ_ITEMS)
    try:
        for start in range(0, READ_ITEMS, 200):
            loop.run(ours.add_items(items[start : start + 200]))
            loop.run(peer.add_items(items[start : start + 200]))
        assert loop.run(ours.get_items()) == loop.run(peer.get_items()) == items
        cases = {name: _timed(loop, session.get_items) for name, session in (("ours", ours), ("peer", peer))}
        medians = alternating(READ_ROUNDS, cases)
    finally:
        loop.run(ours.close())
    ratio = medians["ours"] / medians["peer"]
    return [
        Row(
            f"LedgerSession.get_items(), {READ_ITEMS:,}-item session",
            report.duration(medians["ours"]),
            f"SQLAlchemySession {report.duration(medians['peer'])}",
            ratio,
            "<= 1x peer time",
            ratio <= 1,
        )
    ]


def _timed(loop: asyncio.Runner, call: Callable[[], Awaitable[object]]) -> Callable[[], float]:
    async def once() -> float:
        started = time.perf_counter()
        await call()
        return time.perf_counter() - started

    return lambda: loop.run(once())


def _rounds(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    return (items[start : start + ADDS_PER_ROUND] for start in range(0, len(items), ADDS_PER_ROUND))


def _async_service(loop: asyncio.Runner, url: str) -> list[Row]:
    service = open_async_service(url)
    sync = open_service(url)
    try:
        return _concurrent_appends(loop, service, sync)
    finally:
        loop.run(service.aclose())
        sync.close()


def _concurrent_appends(
    loop: asyncio.Runner, service: AsyncSessionService, sync: SessionService
) -> list[Row]:
    messages = [UserMessage(m.text or "") for m in payloads.cycled(WRITERS * APPENDS_PER_WRITER)]
    sync_session = sync.create_session("bench", app_name="bench").id
    stalls: list[float] = []

    async def concurrent_round() -> float:
        sessions = [(await service.create_session("bench", app_name="bench")).id for _ in range(WRITERS)]

        async def writer(session_id: str, mine: Sequence[Message]) -> None:
            for message in mine:
                await service.append_message(session_id, message)

        async def appends() -> None:
            await asyncio.gather(
                *(writer(s, messages[i::WRITERS][:APPENDS_PER_WRITER]) for i, s in enumerate(sessions))
            )

        started = time.perf_counter()
        stalls.append(await largest_stall(appends))
        return time.perf_counter() - started

    def sync_round() -> float:
        started = time.perf_counter()
        for message in messages:
            sync.append_message(sync_session, message)
        return time.perf_counter() - started

    idle: list[float] = []

    def idle_round() -> float:
        idle.append(loop.run(largest_stall(lambda: asyncio.sleep(IDLE_SECONDS))))
        return IDLE_SECONDS

    cases = {"async": lambda: loop.run(concurrent_round()), "sync": sync_round, "idle": idle_round}
    for case in cases.values():
        case()
    # The end of this process's start-up, as docs/api.md advises a latency-bound application: the
    # objects alive now (the agent SDK's, the services') leave the collector's full passes, which
    # otherwise took 50-70 ms on the loop when one fell in a round. The loop is the measured one.
    gc.freeze()
    stalls.clear()
    idle.clear()
    medians = alternating(ASYNC_ROUNDS, cases)
    total = WRITERS * APPENDS_PER_WRITER
    rates = {name: total / seconds for name, seconds in medians.items()}
    worst = max(stalls)
    return [
        Row(
            f"AsyncSessionService, {WRITERS} coroutines appending to {WRITERS} sessions",
            report.rate(rates["async"], "events"),
            f"sync service, one client {report.rate(rates['sync'], 'events')}",
            rates["async"] / rates["sync"],
            "report",
        ),
        Row(
            "  event loop's largest stall meanwhile (worst round; median of rounds)",
            f"{worst * 1000:.2f} ms; {statistics.median(stalls) * 1000:.2f} ms",
            f"idle loop {max(idle) * 1000:.2f} ms; {statistics.median(idle) * 1000:.2f} ms",
            None,
            "< 10 ms",
            worst < 0.010,
        ),
    ]


if __name__ == "__main__":
    report.main(run)
