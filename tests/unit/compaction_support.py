"""Builders for compaction tests: conversations with ordered timestamps and a recording summarizer."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sessionledger.domain import (
    AssistantMessage,
    Session,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.domain.compaction import CompactionRequest
from sessionledger.domain.window import WindowStats

SESSION = Session(id="s-1", user_id="u-1")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
_ticks = itertools.count(1)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _event(message, *, branch=None, synthetic=False, invocation=None, ts=None, id=None) -> SessionEvent:
    metadata = {SessionEvent.SYNTHETIC: True, SessionEvent.COMPACTION_SOURCE: "test"} if synthetic else {}
    extra = {"id": id} if id else {}
    return SessionEvent(
        session_id=SESSION.id,
        message=message,
        timestamp=ts or at(next(_ticks)),
        metadata=metadata,
        branch=branch,
        invocation_id=invocation,
        **extra,
    )


def user(text: str, **kw) -> SessionEvent:
    return _event(UserMessage(text), **kw)


def assistant(text: str | None = None, calls: Iterable[ToolCall] = (), **kw) -> SessionEvent:
    return _event(AssistantMessage(text, calls), **kw)


def tool_call(call_id: str, name: str = "get_weather", arguments: str = '{"location":"Paris"}') -> ToolCall:
    return ToolCall(call_id, name, arguments)


def calling(*call_ids: str, **kw) -> SessionEvent:
    """An assistant event asking for the given tool calls."""
    return assistant(None, [tool_call(call_id) for call_id in call_ids], **kw)


def answering(*call_ids: str, content: str = '{"temp":"22C"}', **kw) -> SessionEvent:
    """A tool event answering the given tool calls."""
    return _event(ToolResponseMessage([ToolResponse(i, "get_weather", content) for i in call_ids]), **kw)


def summary_pair(text: str = "Earlier: the user likes tea.", **kw) -> list[SessionEvent]:
    return [
        user("Summarize the conversation we had so far.", synthetic=True, **kw),
        assistant(text, synthetic=True, **kw),
    ]


def chat(turns: int, prefix: str = "") -> list[SessionEvent]:
    """`turns` question/answer pairs: User: u1, Assistant: a1, User: u2, ..."""
    return [e for n in range(1, turns + 1) for e in (user(f"{prefix}u{n}"), assistant(f"{prefix}a{n}"))]


def request(events, stats: WindowStats | None = None) -> CompactionRequest:
    return CompactionRequest.of(SESSION, events, stats)


def texts(events: Iterable[SessionEvent]) -> list[str | None]:
    return [event.message.text for event in events]


class RecordingSummarizer:
    """Answers with `reply` (or raises it when it is an exception) and records every call."""

    def __init__(self, reply: str | Exception | None = "The user and the assistant talked.") -> None:
        self.reply = reply
        self.calls: list[tuple[str, str]] = []

    def summarize(self, system_prompt: str, user_prompt: str) -> str | None:
        self.calls.append((system_prompt, user_prompt))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply
