"""A graph's `messages` channel as the session's message events (a minimal conversion).

Each langchain-core message with an id becomes one event with that id, so the ledger's event id
rule stores it once however many checkpoints hold it, and `EventFilter` search, `RecallTools`,
the workers and `sessionledger events` see a LangGraph conversation like any other. Text, tool
calls and tool results are kept; the exact message stays in the checkpoint itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
)
from sessionledger.domain.messages import SystemMessage as LedgerSystemMessage
from sessionledger.domain.messages import UserMessage as LedgerUserMessage


def text_of(content: Any) -> str:
    """A message's content as text: a string as is, the text blocks of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        ]
        return "".join(parts)
    return "" if content is None else str(content)


def ledger_message(message: BaseMessage) -> Message | None:
    """The ledger's message for a langchain-core one; `None` for a kind it has none for."""
    text = text_of(message.content)
    if isinstance(message, HumanMessage):
        return LedgerUserMessage(text)
    if isinstance(message, SystemMessage):
        return LedgerSystemMessage(text)
    if isinstance(message, AIMessage):
        calls = [
            ToolCall(call.get("id") or "", call["name"], json.dumps(call.get("args", {})))
            for call in message.tool_calls
        ]
        return AssistantMessage(text or (None if calls else ""), calls)
    if isinstance(message, ToolMessage):
        return ToolResponseMessage([ToolResponse(message.tool_call_id, message.name or "", text)])
    return None


def new_message_events(session_id: str, values: Any, stored: set[str]) -> Iterator[SessionEvent]:
    """The events of the messages in `values` (a channel's list) whose ids are not in `stored`
    (those this saver knows the session holds), in order; messages without an id are left out,
    as is anything but a list."""
    if not isinstance(values, list):
        return
    for value in values:
        if not isinstance(value, BaseMessage) or not value.id or value.id in stored:
            continue
        message = ledger_message(value)
        if message is not None:
            yield SessionEvent(
                session_id=session_id, message=message, id=value.id, metadata={"source": "langgraph"}
            )
