"""LedgerSessionService against google-adk's own `DatabaseSessionService` on the same PostgreSQL
server (each in a fresh database of its own, both through psycopg 3):

- sequential `append_event`, one event per call through one session object as ADK's Runner
  appends: ShareGPT texts as the user's and the agent's events, with no state delta (most of a
  Runner's events carry none): target at least 5x the peer's rate; and, for the record, the same
  events each carrying a one-key session state delta (a transaction of several statements on both);
- `get_session` of a 1,000-event session (every event, state merged): not slower than the peer.
The floor of a durable append is measured beside them: one autocommitted raw INSERT of the same
ShareGPT message per event into a copy of the ledger table (bench_ledger's), one commit each.
Cases alternate round by round on one event loop; figures are medians.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import psycopg
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types
from sessionledger.domain import MessageType
from sessionledger.infrastructure.adk import LedgerSessionService

from bench import payloads, raw, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating, interleaved, timed

APPEND_ROUNDS, APPENDS_PER_ROUND = 12, 40
READ_ROUNDS = 12
WINDOW_EVENTS = 1_000
APP = "bench"


def run() -> list[Row]:
    loop = asyncio.new_event_loop()
    try:
        with (
            fresh_postgres() as ledger_url,
            fresh_postgres() as peer_url,
            psycopg.connect(ledger_url) as conn,
        ):
            ours = LedgerSessionService(ledger_url)
            theirs = DatabaseSessionService(peer_url.replace("postgresql://", "postgresql+psycopg://", 1))
            loop.run_until_complete(ours.service.run(lambda service: None))  # creates the ledger's tables
            raw.create_table(conn)
            conn.autocommit = True
            try:
                services: dict[str, BaseSessionService] = {"ledger": ours, "adk": theirs}
                return [*_appends(loop, services, conn), *_reads(loop, services)]
            finally:
                loop.run_until_complete(ours.close())
                loop.run_until_complete(theirs.close())
    finally:
        loop.close()


def adk_events(count: int, with_state: bool = False) -> Iterator[Event]:
    """ShareGPT texts as the user's and the agent's events (a one-key state delta each, or none)."""
    for n, message in enumerate(payloads.cycled(count)):
        by_user = message.type is MessageType.USER
        yield Event(
            invocation_id=f"inv{n // 2}",
            author="user" if by_user else "agent",
            content=types.Content(role="user" if by_user else "model", parts=[types.Part(text=message.text)]),
            actions=EventActions(state_delta={"turn": n // 2} if with_state else {}),
        )


def append_rounds(
    loop: asyncio.AbstractEventLoop, service: BaseSessionService, events: Iterator[Event], size: int
) -> Callable[[], float]:
    """Rounds of `size` sequential `append_event`s of `events` to one new session of `service`, each
    call one round's seconds: its events are built before the clock starts (google-adk's models take
    about 50 us an event to build, a tenth of the ledger's append, which the peer's rate would hide)."""
    session = loop.run_until_complete(service.create_session(app_name=APP, user_id="appender"))

    def one_round() -> float:
        batch = list(itertools.islice(events, size))

        async def appending() -> None:
            for event in batch:
                await service.append_event(session, event)

        return timed(lambda: loop.run_until_complete(appending()))

    return one_round


def _on(loop: asyncio.AbstractEventLoop, work: Callable[[], Awaitable[Any]]) -> Callable[[], Any]:
    return lambda: loop.run_until_complete(work())


def _appends(
    loop: asyncio.AbstractEventLoop, services: dict[str, BaseSessionService], conn: psycopg.Connection
) -> list[Row]:
    return [
        *_append_rows(loop, services, conn, with_state=False),
        *_append_rows(loop, services, None, with_state=True),
    ]


def _append_rows(
    loop: asyncio.AbstractEventLoop,
    services: dict[str, BaseSessionService],
    floor: psycopg.Connection | None,
    *,
    with_state: bool,
) -> list[Row]:
    total = (APPEND_ROUNDS + 1) * APPENDS_PER_ROUND

    cases = {
        name: append_rounds(loop, service, adk_events(total, with_state), APPENDS_PER_ROUND)
        for name, service in services.items()
    }
    if floor is not None:
        rows = iter([raw.row_of(m, n + 1) for n, m in enumerate(payloads.cycled(total))])

        def floor_round() -> float:
            return timed(lambda: [raw.insert(floor, next(rows)) for _ in range(APPENDS_PER_ROUND)])

        cases["floor"] = floor_round
    for call in cases.values():  # warm up: connections, prepared statements, caches
        call()
    medians = alternating(APPEND_ROUNDS, cases)
    rates = {name: APPENDS_PER_ROUND / seconds for name, seconds in medians.items()}
    ratio = rates["ledger"] / rates["adk"]
    ours = report.rate(rates["ledger"], "events")
    peer = f"google-adk DatabaseSessionService {report.rate(rates['adk'], 'events')}"
    if with_state:
        name = "ADK append_event, sequential, each with a state delta (LedgerSessionService)"
        return [Row(name, ours, peer, ratio, "report")]
    return [
        Row(
            "ADK append_event, sequential (LedgerSessionService)",
            ours,
            peer,
            ratio,
            ">= 5x its rate",
            ratio >= 5,
        ),
        Row(
            "ADK append_event against the floor: one autocommitted raw INSERT",
            ours,
            f"raw autocommit INSERT {report.rate(rates['floor'], 'events')}",
            rates["ledger"] / rates["floor"],
            "report",
        ),
        Row(
            "google-adk DatabaseSessionService against the same floor",
            report.rate(rates["adk"], "events"),
            f"raw autocommit INSERT {report.rate(rates['floor'], 'events')}",
            rates["adk"] / rates["floor"],
            "report",
        ),
    ]


def _reads(loop: asyncio.AbstractEventLoop, services: dict[str, BaseSessionService]) -> list[Row]:
    async def load(service: BaseSessionService) -> str:
        session = await service.create_session(app_name=APP, user_id="reader", session_id=str(uuid.uuid4()))
        for event in adk_events(WINDOW_EVENTS):
            await service.append_event(session, event)
        return session.id

    def case(service: BaseSessionService) -> Callable[[], Any]:
        session_id = loop.run_until_complete(load(service))

        async def read() -> int:
            got = await service.get_session(app_name=APP, user_id="reader", session_id=session_id)
            assert got is not None
            return len(got.events)

        assert loop.run_until_complete(read()) == WINDOW_EVENTS
        return _on(loop, read)

    cases = {name: case(service) for name, service in services.items()}
    medians = interleaved(READ_ROUNDS, cases)
    ratio = medians["ledger"] / medians["adk"]
    return [
        Row(
            f"ADK get_session, {WINDOW_EVENTS:,}-event session (LedgerSessionService)",
            report.duration(medians["ledger"]),
            f"google-adk DatabaseSessionService {report.duration(medians['adk'])}",
            ratio,
            "<= 1x its time",
            ratio <= 1,
        )
    ]
