"""Turns and the one-line event rendering (docs/api.md "Turns and format_event").

A turn is a root-level, non-synthetic USER event plus everything after it up to the next one.
`format_event` is the single rendering used for token estimates and summarization prompts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sessionledger.domain.messages import Message, MessageType

if TYPE_CHECKING:
    from sessionledger.domain.events import SessionEvent

_ROLES = {
    MessageType.USER: "User",
    MessageType.ASSISTANT: "Assistant",
    MessageType.SYSTEM: "System",
    MessageType.TOOL: "Tool",
}


def format_message(message: Message) -> str:
    """`"User: hi"`, `"Assistant [tool calls: f({...})]"`, `"Tool [responses: f -> ...]"`."""
    plain = _role_and_text(message)
    if plain is not None:
        return f"{plain[0]}: {plain[1]}"
    if message.type is MessageType.TOOL:
        responses = ", ".join(f"{r.name} -> {r.content}" for r in message.tool_responses)
        return f"Tool [responses: {responses}]"
    calls = ", ".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
    if message.text and message.text.strip():
        return f"Assistant: {message.text} [tool calls: {calls}]"
    return f"Assistant [tool calls: {calls}]"


def _role_and_text(message: Message) -> tuple[str, str] | None:
    """The two parts of a plain text message's rendering, `Role: text`; `None` for an assistant's
    tool calls and a tool's responses, which render otherwise."""
    if message.type is MessageType.TOOL or (message.type is MessageType.ASSISTANT and message.tool_calls):
        return None
    return _ROLES[message.type], "[no text content]" if message.text is None else message.text


def format_event(event: SessionEvent) -> str:
    return format_message(event.message)


def format_message_bytes(message: Message) -> int:
    """`len(format_message(message).encode("utf-8"))`, without building the rendering of a plain
    text message, whose bytes are its role's and its text's (a window stat counts them on every
    append and every ingested event: the rendering copied a 1 KB text each time)."""
    plain = _role_and_text(message)
    if plain is None:
        return utf8_length(format_message(message))
    return len(plain[0]) + 2 + utf8_length(plain[1])  # the role and ": " are ASCII


def utf8_length(text: str) -> int:
    """The utf-8 size of `text`; an ASCII text (a flag CPython keeps) is not encoded to know it."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def starts_turn(event: SessionEvent) -> bool:
    """A real (non-synthetic) USER event on the root branch opens a turn."""
    return event.message.type is MessageType.USER and event.branch is None and not event.is_synthetic


def turn_count(events: Iterable[SessionEvent]) -> int:
    return sum(1 for event in events if starts_turn(event))


def turns(events: Iterable[SessionEvent]) -> list[list[SessionEvent]]:
    """Non-synthetic events grouped into turns; events before the first turn form a group of their own."""
    groups: list[list[SessionEvent]] = []
    for event in events:
        if event.is_synthetic:
            continue
        if starts_turn(event) or not groups:
            groups.append([event])
        else:
            groups[-1].append(event)
    return groups
