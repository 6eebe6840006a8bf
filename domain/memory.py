"""Sentinel's persistence pre-filters and read selectors, as plain functions over events.

Each takes a list of events and returns a new list (the input is never changed), so they compose
by plain function calls and any of them can be `SessionMemory`'s `message_filter` or be applied to a
window. Sentinel works on one message per tool call, we work on events that may carry several: the
event id stands for Sentinel's message id, the `invocation_id` for its run id, and a tool result
failed when its event's metadata has `"error": true`. Where Sentinel would drop the tool-call half of
an assistant event that also has text, the text stays (as a copy of the event without the calls),
since Sentinel keeps text and tool calls in separate messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import MessageType

EventSelector = Callable[[list[SessionEvent]], list[SessionEvent]]
"""What every function here is; `compose` chains them."""


def drop_system_prompts(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """Every event but system messages, in order (Sentinel's `SystemPromptRemovalPreFilter`)."""
    return [event for event in events if event.type is not MessageType.SYSTEM]


def drop_failed_tool_calls(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """Failed tool results and the calls that asked for them (`FailedToolCallRemovalPreFilter`).

    A call whose outcome is not among `events` is kept; `remove_unpaired_tool_calls` hides it at
    read time, the way Sentinel's two defaults work together.
    """
    failed = {
        response.id
        for event in events
        if event.type is MessageType.TOOL and event.metadata.get("error") is True
        for response in event.message.tool_responses
    }
    if not failed:
        return list(events)
    kept: list[SessionEvent] = []
    for event in events:
        if event.type is MessageType.TOOL:
            if not any(r.id in failed for r in event.message.tool_responses):
                kept.append(event)
        elif (trimmed := _without_calls(event, failed)) is not None:
            kept.append(trimmed)
    return kept


@dataclass(slots=True)
class _Pairing:
    first_event_id: str
    has_request: bool = False
    has_response: bool = False


def remove_unpaired_tool_calls(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """Sentinel's `UnpairedToolCallsRemover`, rule for rule.

    For each tool-call id, the first event that mentions it is remembered; when that id has a call
    but no result, or a result but no call, that first event goes (by event id, so a second event
    with the same unpaired id survives). Paired calls stay even when not adjacent.
    """
    pairings: dict[str, _Pairing] = {}
    for event in events:
        for response in event.message.tool_responses:
            pairings.setdefault(response.id, _Pairing(event.id)).has_response = True
        for call in event.message.tool_calls:
            pairings.setdefault(call.id, _Pairing(event.id)).has_request = True
    bad = {p.first_event_id for p in pairings.values() if p.has_request != p.has_response}
    return [event for event in events if event.id not in bad]


def full_runs_only(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """The events of complete runs only (Sentinel's `FullRunMessageSelector`).

    A run (events sharing an `invocation_id`; events without one form one run together) is complete
    when it has a user message and a final assistant reply (an assistant event without tool calls).
    All events of a complete run are kept, in order.
    """
    users: set[str | None] = set()
    replies: set[str | None] = set()
    for event in events:
        if event.type is MessageType.USER:
            users.add(event.invocation_id)
        elif event.type is MessageType.ASSISTANT and not event.message.tool_calls:
            replies.add(event.invocation_id)
    complete = users & replies
    return [event for event in events if event.invocation_id in complete]


def remove_all_tool_calls(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """No tool calls and no tool results at all (Sentinel's `RemoveAllToolCallsSelector`)."""
    kept: list[SessionEvent] = []
    for event in events:
        if event.type is MessageType.TOOL:
            continue
        every = {call.id for call in event.message.tool_calls}
        if (trimmed := _without_calls(event, every)) is not None:
            kept.append(trimmed)
    return kept


def compose(*selectors: EventSelector) -> EventSelector:
    """One function applying `selectors` left to right."""

    def composed(events: list[SessionEvent]) -> list[SessionEvent]:
        result = list(events)
        for selector in selectors:
            result = selector(result)
        return result

    return composed


def _without_calls(event: SessionEvent, ids: Iterable[str]) -> SessionEvent | None:
    """`event` without its tool calls in `ids`: itself when it has none of them, a copy with the
    others (or with its text alone) otherwise, `None` when nothing is left."""
    ids = set(ids)
    calls = event.message.tool_calls
    if not any(call.id in ids for call in calls):
        return event
    remaining = tuple(call for call in calls if call.id not in ids)
    if not remaining and not (event.message.text or "").strip():
        return None
    return replace(event, message=replace(event.message, tool_calls=remaining))
