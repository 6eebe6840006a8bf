"""A graph's `messages` channel as the session's message events.

Each langchain-core message with an id becomes one event with that id (the LangChain adapter's
exact conversion, `infrastructure/langchain/messages.py`), so the ledger's event id rule stores it
once however many checkpoints hold it, and `EventFilter` search, `RecallTools`, the workers and
`sessionledger events` see a LangGraph conversation like any other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.messages import BaseMessage
from sessionledger.domain.events import SessionEvent
from sessionledger.infrastructure.langchain.messages import to_event


def new_message_events(session_id: str, values: Any, stored: set[str]) -> Iterator[SessionEvent]:
    """The events of the messages in `values` (a channel's list) whose ids are not in `stored`
    (those this saver knows the session holds), in order. Left out: messages without an id,
    anything but a list, and a message JSON cannot hold (an `artifact` object): its checkpoint,
    written through langgraph's serializer, keeps it exactly."""
    if not isinstance(values, list):
        return
    for value in values:
        if not isinstance(value, BaseMessage) or not value.id or value.id in stored:
            continue
        try:
            event = to_event(session_id, value, event_id=value.id)
        except ValueError:
            continue
        yield event
