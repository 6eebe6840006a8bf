"""Spring AI's message-window rule (v2.0): which messages a chat memory keeps, and its argument checks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sessionledger.domain.messages import Message, MessageType

# Spring AI's own texts, so code and tests written against its chat memory read the same errors
BLANK_ID = "conversationId cannot be null or empty"
NO_MESSAGES = "messages cannot be null"
NULL_ELEMENT = "messages cannot contain null elements"


def checked_id(conversation_id: Any) -> str:
    """The conversation id, or `ValueError` with Spring's text for `None`, a non-string or a blank."""
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        raise ValueError(BLANK_ID)
    return conversation_id


def checked_messages(messages: Any) -> list[Message]:
    """The messages as a list, or `ValueError` with Spring's texts (`None`, a `None` element); a
    single `Message` counts as a list of one, and anything but a `Message` is refused by name."""
    if messages is None:
        raise ValueError(NO_MESSAGES)
    if isinstance(messages, Message):
        return [messages]
    if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        raise ValueError(f"messages must be a list of Message, got {type(messages).__name__}")
    out = list(messages)
    for message in out:
        if message is None:
            raise ValueError(NULL_ELEMENT)
        if not isinstance(message, Message):
            raise ValueError(f"messages must hold Message values, got {type(message).__name__}")
    return out


def window(memory: Sequence[Message], new: Sequence[Message], max_messages: int) -> list[Message]:
    """`memory` plus `new`, cut to at most `max_messages` (Spring AI 2.0's `MessageWindowChatMemory`).

    A system message in `new` that is not already in memory replaces every stored one. System
    messages are never evicted (so several of them can exceed the bound). Past the bound, the
    oldest non-system messages go, and the cut then moves forward to the next user message so a
    turn (a tool call with its result) is never split; with no user message after the cut, every
    non-system message goes.
    """
    stored = list(memory)
    has_new_system = any(m.type is MessageType.SYSTEM and m not in stored for m in new)
    processed = [m for m in stored if not (has_new_system and m.type is MessageType.SYSTEM)] + list(new)
    if len(processed) <= max_messages:
        return processed
    non_system = [i for i, m in enumerate(processed) if m.type is not MessageType.SYSTEM]
    cut = len(processed) - max_messages
    while cut < len(non_system) and processed[non_system[cut]].type is not MessageType.USER:
        cut += 1
    dropped = set(non_system[: min(cut, len(non_system))])
    return [m for i, m in enumerate(processed) if i not in dropped]
