"""The JSON form of messages and events, shared by the ledger and the broker.

`event_to_payload` checks that everything is plain JSON, so the round trip through
`event_from_payload` is exact: same text (or `None`), tool lists, metadata and microseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.mappings import FrozenDict
from sessionledger.domain.messages import Message, MessageType, ToolCall, ToolResponse
from sessionledger.domain.times import in_utc


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with microseconds, e.g. `2024-05-01T12:00:00.000000+00:00`.

    The text of the last datetime formatted is kept, for the same object formatted again: an
    appended event's time is written into its payload, then into its row hash, and formatting
    costs as much as the rest of that hash (a check of identity, not equality, costs nothing
    when the next datetime is another one, as for each record a verify reads).
    """
    global _last_formatted
    last = _last_formatted
    if last[0] is moment:
        return last[1]
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    # `timespec` only where it changes the text (no microseconds): the keyword doubles the cost
    text = utc.isoformat() if utc.microsecond else utc.isoformat(timespec="microseconds")
    _last_formatted = (moment, text)  # one assignment: another thread sees the old pair or the new
    return text


_last_formatted: tuple[datetime | None, str] = (None, "")


def parse_timestamp(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is UTC:
        return moment
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without a timezone: {text!r}")
    return in_utc(moment, "timestamp")


def ensure_json(value: Any, what: str) -> None:
    """`ValueError` naming `what` unless `value` is plain JSON that every backend keeps exactly.

    Plain JSON: str keys, finite numbers, no sets or objects. Kept exactly: integers within
    signed 64 bits (the JSON parser of the read path turns larger ones into floats) and no NUL
    character in any string (PostgreSQL cannot extract a JSON string holding one, so keyword
    search over the event would fail there).
    """
    if not value and type(value) in _NOTHING_TO_CHECK:
        return
    try:
        problem = _json_problem(value, "")
    except RecursionError:
        problem = "nested too deeply (or contains itself)"
    if problem is not None:
        raise ValueError(f"{what} is not JSON-serializable: {problem}")


INT64 = range(-(2**63), 2**63)
"""The integers a stored JSON value may hold (`in` is a constant-time test)."""

_NOTHING_TO_CHECK = {dict, FrozenDict, type(None)}  # when empty: the common case for metadata
_SCALARS = {bool, type(None)}  # need no look; a str (NUL) and an int (range) need one


def _json_problem(value: Any, path: str) -> str | None:
    kind = type(value)
    if kind in _SCALARS:
        return None
    if isinstance(value, str):  # str subclasses (enums) too
        return f"{path or 'value'} contains a NUL character (\\x00)" if "\x00" in value else None
    if isinstance(value, int):  # int subclasses (enums) too
        if value in INT64:
            return None
        return f"{path or 'value'} is {value}, beyond 64 bits (integers lie in -2**63 .. 2**63 - 1)"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path or 'value'} is {value!r}"
    if isinstance(value, dict):  # what `json.dumps` accepts (FrozenDict included), not any Mapping
        for key, item in value.items():
            if not isinstance(key, str):
                return f"key {key!r} at {path or 'top level'} is not a string"
            if "\x00" in key:
                return f"key {key!r} at {path or 'top level'} contains a NUL character (\\x00)"
            if type(item) in _SCALARS or (type(item) is str and "\x00" not in item):
                continue
            problem = _json_problem(item, f"{path}[{key!r}]")
            if problem is not None:
                return problem
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if type(item) in _SCALARS or (type(item) is str and "\x00" not in item):
                continue
            problem = _json_problem(item, f"{path}[{index}]")
            if problem is not None:
                return problem
        return None
    return f"{path or 'value'} has type {kind.__name__}"


def message_to_dict(message: Message) -> dict[str, Any]:
    ensure_json(message.metadata, "message metadata")
    return {
        "type": message.type.value,
        "text": message.text,
        # a comprehension is a function call of its own: none for the common empty lists
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        if message.tool_calls
        else [],
        "tool_responses": [{"id": r.id, "name": r.name, "content": r.content} for r in message.tool_responses]
        if message.tool_responses
        else [],
        "metadata": dict(message.metadata),
    }


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """The message back from `message_to_dict`'s output (trusted: no validation)."""
    calls, responses = data["tool_calls"], data["tool_responses"]
    return Message._trusted(
        _TYPES[data["type"]],
        data["text"],
        tuple([ToolCall._trusted(c["id"], c["name"], c["arguments"]) for c in calls]) if calls else (),
        tuple([ToolResponse._trusted(r["id"], r["name"], r["content"]) for r in responses])
        if responses
        else (),
        data["metadata"],
    )


_TYPES = {kind.value: kind for kind in MessageType}


def event_to_payload(event: SessionEvent) -> dict[str, Any]:
    """The event's JSON payload (its id, session id and archived flag live beside it)."""
    ensure_json(event.metadata, "metadata")
    ensure_json(event.state_delta, "state_delta")
    return {
        "message": message_to_dict(event.message),
        "metadata": dict(event.metadata),
        "branch": event.branch,
        "invocation_id": event.invocation_id,
        "state_delta": dict(event.state_delta),
        "timestamp": format_timestamp(event.timestamp),
    }


def event_document(event: SessionEvent) -> dict[str, Any]:
    """The event as `sessionledger events --json` prints it and the HTTP session API takes and
    gives it: its id, session id and archived flag beside its payload."""
    return {
        "id": event.id,
        "session_id": event.session_id,
        "archived": event.archived,
        **event_to_payload(event),
    }


def event_from_payload(
    session_id: str,
    event_id: str,
    payload: Mapping[str, Any],
    archived: bool = False,
    *,
    validate: bool = False,
) -> SessionEvent:
    """The event back from its payload; `validate=True` for payloads from outside (e.g. the broker).

    Without `validate` the fast trusted constructor is used: the ledger's rows were validated on write.
    With it, any malformed payload raises `ValueError`.
    """
    if validate:
        return validated_event(session_id, event_id, payload, archived)[0]
    try:
        return SessionEvent._trusted(
            event_id,
            session_id,
            parse_timestamp(payload["timestamp"]),
            message_from_dict(payload["message"]),
            payload["metadata"],
            payload["branch"],
            archived,
            payload["invocation_id"],
            payload["state_delta"],
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:  # no cost until one is raised
        raise ValueError(
            f"event {event_id!r} of session {session_id!r} cannot be read back ({error!r}): its row "
            "was changed outside the ledger; `sessionledger verify` names where"
        ) from None


def validated_event(
    session_id: str, event_id: str, payload: Mapping[str, Any], archived: bool = False
) -> tuple[SessionEvent, dict[str, Any]]:
    """The event of a payload from outside (`ValueError` when malformed), and its payload as
    `event_to_payload` writes it: the check of its JSON values, handed back so that a caller
    drafting the event does not build it a second time."""
    try:
        raw = payload["message"]
        message = Message._checked(
            raw["type"],
            raw["text"],
            [ToolCall(c["id"], c["name"], c["arguments"]) for c in raw["tool_calls"]],
            [ToolResponse(r["id"], r["name"], r["content"]) for r in raw["tool_responses"]],
            raw["metadata"],
        )
        event = SessionEvent._checked(
            event_id,
            session_id,
            parse_timestamp(payload["timestamp"]),
            message,
            payload["metadata"],
            payload["branch"],
            archived,
            payload["invocation_id"],
            payload["state_delta"],
        )
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"malformed event payload: {error!r}") from None
    return event, event_to_payload(event)  # the JSON checks
