"""OpenAI Responses input items (the openai-agents SDK's history items) as ledger events, and back.

An item is stored twice in one event: exactly, as the JSON text the SDK's own sessions store
(`json.dumps`), in the event's metadata, so it reads back equal whatever it holds (NUL characters,
integers of any size, key order); and as a readable `Message` (text, tool call or tool result), so
compaction, search, turns and summaries work on it as on any other message. Reading an event that
holds no item (a summary a compaction wrote) gives a plain `{"role", "content"}` message item.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import (
    AssistantMessage,
    Message,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)

ITEM_KEY = "openaiAgentsItem"
"""The event metadata key holding the item's exact JSON text."""

_ROLE_MESSAGES = {"user": UserMessage, "system": SystemMessage, "developer": SystemMessage}


def item_event(session_id: str, item: Mapping[str, Any]) -> SessionEvent:
    """The event that stores `item` in the session (`ValueError` when it is not a JSON object)."""
    if not isinstance(item, Mapping):
        raise ValueError(f"an item must be a mapping, got {type(item).__name__}")
    try:
        text = json.dumps(item)
    except (TypeError, ValueError) as error:
        raise ValueError(f"an item must be JSON: {error}") from None
    return SessionEvent(session_id=session_id, message=item_message(item), metadata={ITEM_KEY: text})


def event_item(event: SessionEvent) -> dict[str, Any]:
    """The item `event` stores; a message item for an event written by the ledger (a summary)."""
    text = event.metadata.get(ITEM_KEY)
    if isinstance(text, str):
        item: dict[str, Any] = json.loads(text)
        return item
    message = event.message
    if message.type is MessageType.TOOL:
        response = message.tool_responses[0] if message.tool_responses else ToolResponse("", "", "")
        return {"type": "function_call_output", "call_id": response.id, "output": response.content}
    return {"role": message.type.value, "content": message.text or ""}


def item_message(item: Mapping[str, Any]) -> Message:
    """The readable rendition of an item: what compaction, search and summaries see of it."""
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and isinstance(role, str):
        text = _content_text(item.get("content"))
        if role == "assistant":
            return AssistantMessage(text)
        return _ROLE_MESSAGES.get(role, UserMessage)(text)
    if kind == "function_call":
        call = ToolCall(_text(item.get("call_id")), _text(item.get("name")), _text(item.get("arguments")))
        return AssistantMessage(None, [call])
    if isinstance(kind, str) and kind.endswith("_output"):
        output = item.get("output")
        content = _text(output) if isinstance(output, str) else _clean(json.dumps(output))
        return ToolResponseMessage(
            [ToolResponse(_text(item.get("call_id")), _text(item.get("name")), content)]
        )
    if kind == "reasoning":
        return AssistantMessage(_content_text(item.get("summary")) or None)
    return AssistantMessage(None)


def _content_text(content: Any) -> str:
    """A message's text: the string itself, or its parts' texts (and refusals) one per line."""
    if isinstance(content, str):
        return _clean(content)
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, Mapping):
            value = part.get("text", part.get("refusal"))
            if isinstance(value, str):
                texts.append(value)
    return _clean("\n".join(texts))


def _text(value: Any) -> str:
    return _clean(value) if isinstance(value, str) else ""


def _clean(text: str) -> str:
    """Without NUL characters, which message texts may not hold (the exact item keeps them)."""
    return text.replace("\x00", "")
