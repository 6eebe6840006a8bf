"""LangChain's chat history on the ledger against langchain-postgres on the same PostgreSQL server.

- `LedgerChatMessageHistory.add_messages`, one message per call, against langchain-postgres'
  `PostgresChatMessageHistory` (psycopg, a connection of its own as its docs set it up): the same
  ShareGPT turns as `HumanMessage` / `AIMessage` (the model's with an id and response and usage
  metadata, as a chat model returns it);
- `messages` of a 1,000-message history through each;
- the asynchronous pair of each (`aadd_messages`, `aget_messages`; the peer on an
  `AsyncConnection`), reported beside (the issue's targets are the synchronous pair's).
The history is opened on a database URL (it owns its `AsyncSessionService`), as a user writes it.
Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_postgres import PostgresChatMessageHistory
from sessionledger.domain import Message, MessageType
from sessionledger.infrastructure.langchain import LedgerChatMessageHistory

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating

ADD_ROUNDS, ADDS_PER_ROUND = 20, 100
READ_MESSAGES, READ_ROUNDS = 1_000, 20
TABLE = "langchain_history"


def run() -> list[Row]:
    with fresh_postgres() as url, psycopg.connect(url) as connection, asyncio.Runner() as loop:
        PostgresChatMessageHistory.create_tables(connection, TABLE)
        aconnection = loop.run(psycopg.AsyncConnection.connect(url))
        try:
            return [
                *_adds(url, connection),
                *_reads(url, connection),
                *_async_adds(loop, url, aconnection),
                *_async_reads(loop, url, aconnection),
            ]
        finally:
            loop.run(aconnection.close())


def _messages(count: int) -> list[BaseMessage]:
    return [_message(number, message) for number, message in enumerate(payloads.cycled(count))]


def _message(number: int, message: Message) -> BaseMessage:
    text = message.text or ""
    if message.type is not MessageType.ASSISTANT:
        return HumanMessage(text)
    return AIMessage(
        text,
        id=f"run-{number:08d}",
        response_metadata={"model_name": "gpt-4o-mini", "finish_reason": "stop"},
        usage_metadata={"input_tokens": 120, "output_tokens": 48, "total_tokens": 168},
    )


def _histories(url: str, connection: psycopg.Connection[Any]) -> tuple[LedgerChatMessageHistory, Any]:
    ours = LedgerChatMessageHistory(str(uuid.uuid4()), url)
    return ours, PostgresChatMessageHistory(TABLE, str(uuid.uuid4()), sync_connection=connection)


def _rounds(messages: Sequence[BaseMessage]) -> Iterator[Sequence[BaseMessage]]:
    return (messages[start : start + ADDS_PER_ROUND] for start in range(0, len(messages), ADDS_PER_ROUND))


def _add_row(name: str, rates: dict[str, float], *, targeted: bool) -> Row:
    ratio = rates["ours"] / rates["peer"]
    return Row(
        f"LedgerChatMessageHistory.{name}, one message per call",
        report.rate(rates["ours"], "messages"),
        f"PostgresChatMessageHistory.{name} {report.rate(rates['peer'], 'messages')}",
        ratio,
        "> 1 (faster)" if targeted else "report",
        ratio > 1 if targeted else None,
    )


def _read_row(name: str, medians: dict[str, float], *, targeted: bool) -> Row:
    ratio = medians["ours"] / medians["peer"]
    return Row(
        f"LedgerChatMessageHistory.{name}, {READ_MESSAGES:,} messages",
        report.duration(medians["ours"]),
        f"PostgresChatMessageHistory.{name} {report.duration(medians['peer'])}",
        ratio,
        "< 1x peer time (faster)" if targeted else "report",
        ratio < 1 if targeted else None,
    )


def _adds(url: str, connection: psycopg.Connection[Any]) -> list[Row]:
    ours, peer = _histories(url, connection)
    batches = {name: _rounds(_messages(ADD_ROUNDS * ADDS_PER_ROUND)) for name in ("ours", "peer")}

    def adding(history: Any, name: str) -> Callable[[], float]:
        def add_round() -> float:
            started = time.perf_counter()
            for message in next(batches[name]):
                history.add_messages([message])
            return time.perf_counter() - started

        return add_round

    try:
        cases = {"ours": adding(ours, "ours"), "peer": adding(peer, "peer")}
        for case in cases.values():  # warm up: connections, prepared statements, the session
            case()
        medians = alternating(ADD_ROUNDS - 1, cases)
    finally:
        ours.close()
    return [_add_row("add_messages", {n: ADDS_PER_ROUND / s for n, s in medians.items()}, targeted=True)]


def _reads(url: str, connection: psycopg.Connection[Any]) -> list[Row]:
    ours, peer = _histories(url, connection)
    messages = _messages(READ_MESSAGES)
    try:
        for start in range(0, READ_MESSAGES, 200):
            ours.add_messages(messages[start : start + 200])
            peer.add_messages(messages[start : start + 200])
        assert ours.messages == peer.messages == messages

        def reading(history: Any) -> Callable[[], float]:
            def read() -> float:
                started = time.perf_counter()
                history.messages  # noqa: B018  # the read under test
                return time.perf_counter() - started

            return read

        medians = alternating(READ_ROUNDS, {"ours": reading(ours), "peer": reading(peer)})
    finally:
        ours.close()
    return [_read_row("messages", medians, targeted=True)]


def _async_adds(loop: asyncio.Runner, url: str, aconnection: psycopg.AsyncConnection[Any]) -> list[Row]:
    ours = LedgerChatMessageHistory(str(uuid.uuid4()), url)
    peer = PostgresChatMessageHistory(TABLE, str(uuid.uuid4()), async_connection=aconnection)
    batches = {name: _rounds(_messages(ADD_ROUNDS * ADDS_PER_ROUND)) for name in ("ours", "peer")}

    def adding(history: Any, name: str) -> Callable[[], float]:
        async def add_round() -> float:
            started = time.perf_counter()
            for message in next(batches[name]):
                await history.aadd_messages([message])
            return time.perf_counter() - started

        return lambda: loop.run(add_round())

    try:
        cases = {"ours": adding(ours, "ours"), "peer": adding(peer, "peer")}
        for case in cases.values():
            case()
        medians = alternating(ADD_ROUNDS - 1, cases)
    finally:
        loop.run(ours.aclose())
    rates = {n: ADDS_PER_ROUND / s for n, s in medians.items()}
    return [_add_row("aadd_messages", rates, targeted=False)]


def _async_reads(loop: asyncio.Runner, url: str, aconnection: psycopg.AsyncConnection[Any]) -> list[Row]:
    ours = LedgerChatMessageHistory(str(uuid.uuid4()), url)
    peer = PostgresChatMessageHistory(TABLE, str(uuid.uuid4()), async_connection=aconnection)
    messages = _messages(READ_MESSAGES)
    try:
        for start in range(0, READ_MESSAGES, 200):
            loop.run(ours.aadd_messages(messages[start : start + 200]))
            loop.run(peer.aadd_messages(messages[start : start + 200]))
        assert loop.run(ours.aget_messages()) == loop.run(peer.aget_messages()) == messages

        def reading(history: Any) -> Callable[[], float]:
            async def read() -> float:
                started = time.perf_counter()
                await history.aget_messages()
                return time.perf_counter() - started

            return lambda: loop.run(read())

        medians = alternating(READ_ROUNDS, {"ours": reading(ours), "peer": reading(peer)})
    finally:
        loop.run(ours.aclose())
    return [_read_row("aget_messages()", medians, targeted=False)]


if __name__ == "__main__":
    report.main(run)
