"""OpenAI Responses input items (the openai-agents SDK's history items) as ledger events, and back.

An item is stored twice in one event: exactly, as the JSON text the SDK's own sessions store
(`json.dumps`), in the event's metadata, so it reads back equal whatever it holds (NUL characters,
integers of any size, key order); and as a readable `Message` (text, tool call or tool result), so
compaction, search, turns and summaries work on it as on any other message. A plain text message
(what a user says) is its `Message` whole, so it is stored once; so is the text of a message item
with one content part (a model's output), which the JSON text then holds as `null`. Reading an
event that holds no item (a summary a compaction wrote) gives a plain `{"role", "content"}` message
item.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from sessionledger.domain.codec import message_from_dict
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
    storable_text,
)

ITEM_KEY = "openaiAgentsItem"
"""The event metadata key holding the item's exact JSON text."""
SHAPE_KEY = "openaiAgentsShape"
"""Instead of the text, for a plain text message (`{"role", "content"}` only, in the order this
names), which its message holds whole: half the payload, nothing to parse on the way back."""
TEXT_PART_KEY = "openaiAgentsTextPart"
"""Set when the text leaves out (as `null`) the text of the item's one content part, which its
message holds exactly (a model's output message): the text is stored and sent once, not twice."""
LONG_NUMBERS_KEY = "openaiAgentsLongNumbers"
"""Set when the text may hold an integer beyond 64 bits, which only the stdlib parser reads exactly."""

_PLAIN_ROLES = {"user": MessageType.USER, "assistant": MessageType.ASSISTANT, "system": MessageType.SYSTEM}
_PLAIN_SHAPES: dict[tuple[str, ...], str] = {
    ("role", "content"): "role,content",
    ("content", "role"): "content,role",
}
_LONG_DIGITS = re.compile(r"\d{19}")

_ROLE_MESSAGES = {"user": UserMessage, "system": SystemMessage, "developer": SystemMessage}


def item_event(session_id: str, item: Mapping[str, Any]) -> SessionEvent:
    """The event that stores `item` in the session (`ValueError` when it is not a JSON object)."""
    if not isinstance(item, Mapping):
        raise ValueError(f"an item must be a mapping, got {type(item).__name__}")
    shape = _PLAIN_SHAPES.get(tuple(item))
    role, content = item.get("role"), item.get("content")
    if (
        shape is not None
        and isinstance(role, str)
        and role in _PLAIN_ROLES
        and isinstance(content, str)
        and storable_text(content) is content
    ):
        message = Message(_PLAIN_ROLES[role], content)
        return SessionEvent(session_id=session_id, message=message, metadata={SHAPE_KEY: shape})
    message = item_message(item)
    stored = _without_text_part(item, message)
    try:
        text = json.dumps(item if stored is None else stored)
    except (TypeError, ValueError) as error:
        raise ValueError(f"an item must be JSON: {error}") from None
    metadata: dict[str, Any] = {ITEM_KEY: text}
    if stored is not None:
        metadata[TEXT_PART_KEY] = True
    if _LONG_DIGITS.search(text):
        metadata[LONG_NUMBERS_KEY] = True
    return SessionEvent(session_id=session_id, message=message, metadata=metadata)


def _without_text_part(item: Mapping[str, Any], message: Message) -> dict[str, Any] | None:
    """The item with its one content part's text as `null` (every key kept in its place), when
    `message` holds that text exactly, so the read can put it back; `None` otherwise."""
    content = item.get("content")
    if not isinstance(content, list) or len(content) != 1 or item.get("type", "message") != "message":
        return None
    part = content[0]
    if not isinstance(part, Mapping) or not isinstance(part.get("text"), str) or part["text"] != message.text:
        return None
    return {**item, "content": [{**part, "text": None}]}


def event_item(event: SessionEvent, fast_loads: Callable[[str], Any] = json.loads) -> dict[str, Any]:
    """The item `event` stores; a message item for an event written by the ledger (a summary).

    `fast_loads` may be a faster JSON parser that reads integers of up to 64 bits exactly and
    raises `ValueError` on what it cannot read (orjson: NaN, lone surrogates); the stdlib parser
    reads the rest."""
    message = event.message
    return _item(event.metadata, message.type.value, message.text, lambda: message, fast_loads)


def payload_item(payload: Mapping[str, Any], fast_loads: Callable[[str], Any] = json.loads) -> dict[str, Any]:
    """`event_item` of the event whose stored payload (`event_to_payload`) is `payload`: the
    history read skips building the events (their timestamps, their messages) it does not need."""
    fields = payload["message"]
    return _item(
        payload["metadata"], fields["type"], fields["text"], lambda: message_from_dict(fields), fast_loads
    )


def _item(
    metadata: Mapping[str, Any],
    kind: str,
    text: str | None,
    message: Callable[[], Message],
    fast_loads: Callable[[str], Any],
) -> dict[str, Any]:
    """The item an event stores, from its metadata and its message's type and text; `message`
    builds the whole message, which only an event holding no item (a summary) needs."""
    shape = metadata.get(SHAPE_KEY)
    if shape == "content,role":
        return {"content": text, "role": kind}
    if shape == "role,content":
        return {"role": kind, "content": text}
    exact = metadata.get(ITEM_KEY)
    if isinstance(exact, str):
        item: dict[str, Any]
        if LONG_NUMBERS_KEY in metadata:
            item = json.loads(exact)
        else:
            try:
                item = fast_loads(exact)
            except ValueError:
                item = json.loads(exact)
        if TEXT_PART_KEY in metadata:
            item["content"][0]["text"] = text
        return item
    built = message()
    if built.type is MessageType.TOOL:
        response = built.tool_responses[0] if built.tool_responses else ToolResponse("", "", "")
        return {"type": "function_call_output", "call_id": response.id, "output": response.content}
    return {"role": built.type.value, "content": built.text or ""}


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
        content = _text(output) if isinstance(output, str) else storable_text(json.dumps(output))
        return ToolResponseMessage(
            [ToolResponse(_text(item.get("call_id")), _text(item.get("name")), content)]
        )
    if kind == "reasoning":
        return AssistantMessage(_content_text(item.get("summary")) or None)
    return AssistantMessage(None)


def _content_text(content: Any) -> str:
    """A message's text: the string itself, or its parts' texts (and refusals) one per line."""
    if isinstance(content, str):
        return storable_text(content)
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, Mapping):
            value = part.get("text", part.get("refusal"))
            if isinstance(value, str):
                texts.append(value)
    return storable_text("\n".join(texts))


def _text(value: Any) -> str:
    return storable_text(value) if isinstance(value, str) else ""
