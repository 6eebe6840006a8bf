"""sessionledger side by side with the session stores agents use instead, on one PostgreSQL in one
run (`python -m bench --peers`; the peers come with the optional `bench` extra).

Every store gets the same 1 KB ShareGPT messages (`bench.payloads`), one message per call as an
agent appends them, and reads back a session of 1,000 of them:

- raw psycopg, the floor: one autocommitted INSERT per event into a copy of the ledger table, and
  one SELECT of a session's event rows (psycopg decodes the JSON);
- sessionledger: `append_message` and `get_messages` (hash chain, stats and state included);
- langchain-postgres `PostgresChatMessageHistory` (psycopg, sync): `add_messages([m])` and `messages`;
- openai-agents `SQLAlchemySession` (SQLAlchemy asyncio + asyncpg): `add_items([m])`, `get_items()`;
- google-adk `DatabaseSessionService` (SQLAlchemy asyncio + asyncpg): `append_event`, `get_session`.

Each store's input objects are built before the clock starts (a message is already a `Message`,
a LangChain message, an item or an ADK `Event` in the agent's hands). The async peers run on one
event loop kept for the whole run. google-adk's tables are named like the ledger's, so they live
in a schema of their own (`adk`). Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from sessionledger.domain import Message, MessageType
from sessionledger.infrastructure import open_service

from bench import payloads, raw, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved

APPEND_ROUNDS, APPENDS_PER_ROUND = 11, 50
READ_ROUNDS = 15
WINDOW_EVENTS = 1_000
FLOOR = "raw psycopg, one autocommitted INSERT / one SELECT (the floor)"
LEDGER = "sessionledger `append_message` / `get_messages`"
LANGCHAIN = "langchain-postgres `PostgresChatMessageHistory`"
OPENAI = "openai-agents `SQLAlchemySession`"
ADK = "google-adk `DatabaseSessionService`"


@dataclass(frozen=True, slots=True)
class Figures:
    """One store's medians: events per second appended one at a time, seconds per window read."""

    append_rate: float
    read_seconds: float


class Store:
    """One store as the benchmark drives it: `append()` stores the next message of a round in a
    session of its own, `read()` reads the 1,000-event session `load()` stored beforehand."""

    def load(self, messages: list[Message]) -> None:
        raise NotImplementedError

    def append_round(self) -> None:
        raise NotImplementedError

    def read(self) -> int:
        raise NotImplementedError


def _rounds(items: list[Any]) -> Iterator[list[Any]]:
    return (items[start : start + APPENDS_PER_ROUND] for start in range(0, len(items), APPENDS_PER_ROUND))


class Floor(Store):
    def __init__(self, url: str, ledger_session: str, messages: list[Message], stack: ExitStack) -> None:
        self._reader = stack.enter_context(psycopg.connect(url))
        self._writer = stack.enter_context(psycopg.connect(url, autocommit=True))
        raw.create_table(self._reader)
        self._batches = _rounds([raw.row_of(m, n + 1) for n, m in enumerate(messages)])
        self._session = ledger_session  # the same rows the ledger reads back

    def load(self, messages: list[Message]) -> None:
        pass

    def append_round(self) -> None:
        for row in next(self._batches):
            raw.insert(self._writer, row)

    def read(self) -> int:
        return len(raw.select_window(self._reader, self._session))


class Ledger(Store):
    def __init__(self, url: str, messages: list[Message], stack: ExitStack) -> None:
        self.service = stack.enter_context(open_service(url))
        self._appended = self.service.create_session("bench", app_name="bench").id
        self._batches = _rounds(messages)
        self.window_session = ""

    def load(self, messages: list[Message]) -> None:
        self.window_session = payloads.session_with(self.service, len(messages))

    def append_round(self) -> None:
        for message in next(self._batches):
            self.service.append_message(self._appended, message)

    def read(self) -> int:
        return len(self.service.get_messages(self.window_session))


class LangChain(Store):
    TABLE = "langchain_messages"

    def __init__(self, url: str, messages: list[Message], stack: ExitStack) -> None:
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_postgres import PostgresChatMessageHistory

        self._history_type = PostgresChatMessageHistory
        self._connection = stack.enter_context(psycopg.connect(url))
        PostgresChatMessageHistory.create_tables(self._connection, self.TABLE)

        def converted(message: Message) -> Any:
            kind = HumanMessage if message.type is MessageType.USER else AIMessage
            return kind(content=message.text or "")

        self._convert = converted
        self._appended = self._history()
        self._batches = _rounds([converted(m) for m in messages])
        self._window = self._history()

    def _history(self) -> Any:
        return self._history_type(self.TABLE, str(uuid.uuid4()), sync_connection=self._connection)

    def load(self, messages: list[Message]) -> None:
        self._window.add_messages([self._convert(m) for m in messages])

    def append_round(self) -> None:
        for message in next(self._batches):
            self._appended.add_messages([message])

    def read(self) -> int:
        return len(self._window.messages)


class OpenAIAgents(Store):
    def __init__(self, url: str, messages: list[Message], loop: asyncio.Runner) -> None:
        from agents.extensions.memory import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        self._loop = loop
        self._engine = create_async_engine(_asyncpg(url))
        self._session_type = SQLAlchemySession
        self._appended = self._session()
        self._window = self._session()
        self._batches = _rounds([_item(m) for m in messages])

    def _session(self) -> Any:
        return self._session_type(str(uuid.uuid4()), engine=self._engine, create_tables=True)

    def close(self) -> None:
        self._loop.run(self._engine.dispose())

    def load(self, messages: list[Message]) -> None:
        self._loop.run(self._window.add_items([_item(m) for m in messages]))

    def append_round(self) -> None:
        async def appended(items: list[Any]) -> None:
            for item in items:
                await self._appended.add_items([item])

        self._loop.run(appended(next(self._batches)))

    def read(self) -> int:
        return len(self._loop.run(self._window.get_items()))


class GoogleADK(Store):
    SCHEMA = "adk"
    APP, USER = "bench", "bench"

    def __init__(self, url: str, messages: list[Message], loop: asyncio.Runner) -> None:
        from google.adk.sessions import DatabaseSessionService

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {self.SCHEMA}")
        self._loop = loop
        self._service = DatabaseSessionService(
            _asyncpg(url), connect_args={"server_settings": {"search_path": self.SCHEMA}}
        )
        self._appended = self._new_session()
        self._window = self._new_session()
        self._batches = _rounds([self._event(m) for m in messages])

    def _new_session(self) -> Any:
        return self._loop.run(self._service.create_session(app_name=self.APP, user_id=self.USER))

    @staticmethod
    def _event(message: Message) -> Any:
        from google.adk.events import Event
        from google.genai import types

        user = message.type is MessageType.USER
        return Event(
            author="user" if user else "agent",
            invocation_id=str(uuid.uuid4()),
            content=types.Content(role="user" if user else "model", parts=[types.Part(text=message.text)]),
        )

    def close(self) -> None:
        self._loop.run(self._service.close())

    def load(self, messages: list[Message]) -> None:
        async def appended() -> None:
            for message in messages:
                await self._service.append_event(self._window, self._event(message))

        self._loop.run(appended())

    def append_round(self) -> None:
        async def appended(events: list[Any]) -> None:
            for event in events:
                await self._service.append_event(self._appended, event)

        self._loop.run(appended(next(self._batches)))

    def read(self) -> int:
        found = self._loop.run(
            self._service.get_session(app_name=self.APP, user_id=self.USER, session_id=self._window.id)
        )
        return len(found.events)


def _asyncpg(url: str) -> str:
    return "postgresql+asyncpg://" + url.split("://", 1)[1]


def _item(message: Message) -> dict[str, Any]:
    return {"role": "user" if message.type is MessageType.USER else "assistant", "content": message.text}


@contextmanager
def _stores(url: str, messages: list[Message]) -> Iterator[dict[str, Store]]:
    with ExitStack() as stack:
        loop = stack.enter_context(asyncio.Runner())
        ledger = Ledger(url, messages, stack)
        ledger.load(messages[:WINDOW_EVENTS])
        openai = OpenAIAgents(url, messages, loop)
        stack.callback(openai.close)
        adk = GoogleADK(url, messages, loop)
        stack.callback(adk.close)
        stores: dict[str, Store] = {
            FLOOR: Floor(url, ledger.window_session, messages, stack),
            LEDGER: ledger,
            LANGCHAIN: LangChain(url, messages, stack),
            OPENAI: openai,
            ADK: adk,
        }
        for store in stores.values():
            if store is not ledger:
                store.load(messages[:WINDOW_EVENTS])
        yield stores


def measure() -> dict[str, Figures]:
    """Every store's medians, measured in one run on one fresh database."""
    messages = list(payloads.messages(max(APPEND_ROUNDS * APPENDS_PER_ROUND, WINDOW_EVENTS)))
    with fresh_postgres() as url, _stores(url, messages) as stores:
        counts = {name: store.read() for name, store in stores.items()}
        assert set(counts.values()) == {WINDOW_EVENTS}, counts
        for store in stores.values():  # warm up: connections, prepared statements, caches
            store.append_round()
        appends = interleaved(APPEND_ROUNDS - 1, _cases(stores, lambda store: store.append_round))
        reads = interleaved(READ_ROUNDS, _cases(stores, lambda store: store.read))
    return {name: Figures(APPENDS_PER_ROUND / appends[name], reads[name]) for name in stores}


def _cases(stores: dict[str, Store], call: Callable[[Store], Callable[[], object]]) -> dict[str, Any]:
    return {name: call(store) for name, store in stores.items()}


def side_by_side(figures: dict[str, Figures]) -> str:
    """The stores in one markdown table, each figure also as a ratio to the floor's."""
    floor = figures[FLOOR]
    lines = ["| store | sequential append | read a 1,000-event session |", "|---|---|---|"]
    for name, found in figures.items():
        append = report.rate(found.append_rate, "events")
        read = report.duration(found.read_seconds)
        if name != FLOOR:
            append += f" ({found.append_rate / floor.append_rate:.2f} of the floor)"
            read += f" ({found.read_seconds / floor.read_seconds:.2f}x)"
        label = f"**{name}**" if name == LEDGER else name
        lines.append(f"| {label} | {append} | {read} |")
    return "\n".join(lines) + "\n"


def rows(figures: dict[str, Figures]) -> list[Row]:
    """The issue's targets: appends >= 0.7 of the floor and faster than langchain-postgres, a
    1,000-event read <= 1.2x the raw SELECT and not slower than openai-agents."""
    ours, floor = figures[LEDGER], figures[FLOOR]
    langchain, openai = figures[LANGCHAIN], figures[OPENAI]
    append_floor = ours.append_rate / floor.append_rate
    append_langchain = ours.append_rate / langchain.append_rate
    read_floor = ours.read_seconds / floor.read_seconds
    read_openai = ours.read_seconds / openai.read_seconds
    mine = report.rate(ours.append_rate, "events")
    read = report.duration(ours.read_seconds)
    return [
        Row("append_message against the floor", mine, f"raw autocommit INSERT "
            f"{report.rate(floor.append_rate, 'events')}", append_floor, ">= 0.70", append_floor >= 0.7),
        Row("append_message against langchain-postgres", mine,
            f"add_messages {report.rate(langchain.append_rate, 'events')}", append_langchain, "> 1 (faster)",
            append_langchain > 1),
        Row("get_messages, 1,000 events, against the floor", read,
            f"raw SELECT {report.duration(floor.read_seconds)}", read_floor, "<= 1.2x", read_floor <= 1.2),
        Row("get_messages, 1,000 events, against openai-agents", read,
            f"get_items {report.duration(openai.read_seconds)}", read_openai, "<= 1.0x", read_openai <= 1.0),
    ]  # fmt: skip


def run() -> list[Row]:
    figures = measure()
    print(side_by_side(figures))
    return rows(figures)


if __name__ == "__main__":
    report.main(run)
