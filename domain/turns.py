"""Turns and the one-line event rendering (docs/api.md "Turns and format_event").

A turn is a root-level, non-synthetic USER event plus everything after it up to the next one.
`format_event` is the single rendering used for token estimates and summarization prompts.
"""

from __future__ import annotations

from collections.abc import Iterable

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import Message, MessageType

_ROLES = {
    MessageType.USER: "User",
    MessageType.ASSISTANT: "Assistant",
    MessageType.SYSTEM: "System",
    MessageType.TOOL: "Tool",
}


def format_message(message: Message) -> str:
    """`"User: hi"`, `"Assistant [tool calls: f({...})]"`, `"Tool [responses: f -> ...]"`."""
    if message.type is MessageType.ASSISTANT and message.tool_calls:
        calls = ", ".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
        if message.text and message.text.strip():
            return f"Assistant: {message.text} [tool calls: {calls}]"
        return f"Assistant [tool calls: {calls}]"
    if message.type is MessageType.TOOL:
        responses = ", ".join(f"{r.name} -> {r.content}" for r in message.tool_responses)
        return f"Tool [responses: {responses}]"
    text = "[no text content]" if message.text is None else message.text
    return f"{_ROLES[message.type]}: {text}"


def format_event(event: SessionEvent) -> str:
    return format_message(event.message)


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
