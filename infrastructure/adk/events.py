"""google-adk `Event`s as ledger events and back, exactly.

The ledger event keeps the whole ADK event as JSON text (`metadata["adk"]`, pydantic's own
`model_dump_json`, so every field, bytes and float timestamp included, comes back equal) and a
`Message` read from its content, so the workers' triggers, strategies and summarizers, search and
the audit tools see a conversation they understand. Text rather than a nested object because the
ledger checks and hashes metadata on every append: a string is one check and keeps the canonical
JSON on its fast path (ADK's float timestamp would not). Ledgers written before hold the object;
both read back the same.

A summary the workers wrote (a synthetic pair) reads back as ADK's own compaction event
(`EventActions.compaction`), which ADK's prompt building already knows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types
from pydantic_core import PydanticSerializationError, to_jsonable_python
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.json_text import read_json
from sessionledger.domain.messages import (
    AssistantMessage,
    Message,
    MessageType,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)

ADK_KEY = "adk"
"""The metadata key holding the ADK event (its JSON text; an object in ledgers written before)."""

SUMMARY_AUTHOR = "user"
"""Who ADK's own summarizer names as the author of a compaction event."""


def to_ledger(event: Event, session_id: str) -> SessionEvent:
    """The ledger event for an ADK event (already trimmed of `temp:` keys) of ledger session `session_id`.

    `ValueError` for an event the ledger cannot keep: text UTF-8 cannot encode (a lone surrogate,
    which pydantic refuses to write as JSON) or a timestamp that is no time `datetime` has."""
    delta = event.actions.state_delta if event.actions else {}
    try:
        adk_json = event.model_dump_json(exclude_none=True)
    except PydanticSerializationError as error:
        raise ValueError(f"event {event.id!r} cannot be stored: {error}") from None
    return SessionEvent(
        session_id=session_id,
        id=event.id,
        message=message_of(event),
        timestamp=_moment(event),
        metadata={ADK_KEY: adk_json},
        branch=event.branch or None,
        invocation_id=event.invocation_id or None,
        state_delta=json_safe(delta),
    )


def _moment(event: Event) -> datetime:
    """The event's timestamp (seconds since the epoch) as a UTC `datetime`."""
    try:
        return datetime.fromtimestamp(event.timestamp, UTC)
    except (OverflowError, OSError, ValueError):  # NaN, infinite, or beyond the years 1..9999
        raise ValueError(
            f"event {event.id!r} has timestamp {event.timestamp!r}, which is no time in the years 1 to 9999"
        ) from None


def json_safe(delta: Mapping[str, Any]) -> dict[str, Any]:
    """The state delta as JSON values: a value that has none becomes its `repr`, as in google-adk
    (which warns and still stores the event)."""
    try:
        return dict(to_jsonable_python(dict(delta)))
    except Exception:  # pydantic_core raises several types for values it cannot serialize
        return {key: _jsonable_or_repr(value) for key, value in delta.items()}


def _jsonable_or_repr(value: Any) -> Any:
    try:
        return to_jsonable_python(value)
    except Exception:  # as above
        return repr(value)


def message_of(event: Event) -> Message:
    """What the event says, as a chat message: function responses are a tool message, the
    user's content a user message, anything else (an agent's text and calls, or no content) an
    assistant message."""
    parts = list(event.content.parts or ()) if event.content else []
    responses = [p.function_response for p in parts if p.function_response is not None]
    if responses:
        return ToolResponseMessage(
            ToolResponse(id=r.id or "", name=r.name or "", content=_json(r.response)) for r in responses
        )
    text = "\n".join(p.text for p in parts if p.text and not p.thought)
    if event.content is not None and (event.author == "user" or event.content.role == "user"):
        return UserMessage(text)
    calls = [
        ToolCall(id=c.id or "", name=c.name or "", arguments=_json(c.args or {}))
        for p in parts
        if (c := p.function_call) is not None
    ]
    return AssistantMessage(text or None, calls)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def to_adk(events: Sequence[SessionEvent]) -> list[Event]:
    """The window's ledger events as ADK events, in order (a summary pair becomes one compaction
    event placed just before the events that follow it)."""
    adk: list[Event] = []
    for index, event in enumerate(events):
        if ADK_KEY in event.metadata:
            adk.append(adk_event(event.metadata[ADK_KEY]))
        elif event.is_synthetic:
            if event.type is MessageType.ASSISTANT:
                adk.append(_compaction(event, _next_real(events[index + 1 :])))
        else:
            adk.append(_plain(event))
    return adk


def adk_event(stored: Any) -> Event:
    """The ADK event back from `metadata["adk"]` (JSON text, or the object of older ledgers)."""
    if isinstance(stored, str):
        return Event.model_validate_json(stored)
    return Event.model_validate(stored)


def adk_json(stored: Any) -> Mapping[str, Any]:
    """`metadata["adk"]` as a JSON object, whichever form it was stored in."""
    document: Mapping[str, Any] = orjson.loads(stored) if isinstance(stored, str) else stored
    return document


def _next_real(events: Iterable[SessionEvent]) -> float | None:
    return next((timestamp_of(e) for e in events if not e.is_synthetic), None)


def timestamp_of(event: SessionEvent) -> float:
    """The event's exact float timestamp, as its ADK event has it (`to_adk`), without building
    that event: the ADK JSON's own when there is one."""
    if ADK_KEY in event.metadata:
        stored = adk_json(event.metadata[ADK_KEY]).get("timestamp")
        if isinstance(stored, float | int):
            return float(stored)
    return event.timestamp.timestamp()


def _compaction(summary: SessionEvent, next_real: float | None) -> Event:
    """The workers' summary as ADK's compaction event.

    ADK shows a summary as model content at its end timestamp and drops the raw events inside
    its range; the archived events are no longer in the window, so the range is one instant,
    strictly before the first event kept after it (else it would hide that event).
    """
    at = summary.timestamp.timestamp()
    if next_real is not None and at >= next_real:
        at = math.nextafter(next_real, -math.inf)
    content = types.Content(role="model", parts=[types.Part(text=summary.message.text or "")])
    return Event(
        id=summary.id,
        invocation_id=summary.invocation_id or summary.id,
        author=SUMMARY_AUTHOR,
        timestamp=at,
        actions=EventActions(
            compaction=EventCompaction(start_timestamp=at, end_timestamp=at, compacted_content=content)
        ),
    )


def _plain(event: SessionEvent) -> Event:
    """An event appended through another API (`append_message`): its message as ADK content."""
    message = event.message
    role = "user" if message.type in (MessageType.USER, MessageType.TOOL) else "model"
    parts: list[types.Part] = []
    if message.text:
        parts.append(types.Part(text=message.text))
    parts += [
        types.Part(function_call=types.FunctionCall(id=c.id, name=c.name, args=_object(c.arguments)))
        for c in message.tool_calls
    ]
    parts += [
        types.Part(
            function_response=types.FunctionResponse(id=r.id, name=r.name, response=_object(r.content))
        )
        for r in message.tool_responses
    ]
    return Event(
        id=event.id,
        invocation_id=event.invocation_id or "",
        author="user" if message.type is MessageType.USER else "model",
        branch=event.branch,
        timestamp=event.timestamp.timestamp(),
        content=types.Content(role=role, parts=parts) if parts else None,
        actions=EventActions(state_delta=thaw(event.state_delta)),
    )


def _object(text: str) -> dict[str, Any]:
    """A tool call's arguments or a response as the dict ADK wants (`{"result": text}` otherwise)."""
    try:
        value = read_json(text)
    except ValueError:
        return {"result": text}
    return value if isinstance(value, dict) else {"result": value}


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a ledger value (read-only mappings become dicts)."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value
