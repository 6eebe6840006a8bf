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
    return [trimmed for event in events if (trimmed := _without_tool_ids(event, failed)) is not None]


@dataclass(slots=True)
class _Pairing:
    first_event_id: str
    has_request: bool = False
    has_response: bool = False


def remove_unpaired_tool_calls(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """Sentinel's `UnpairedToolCallsRemover`, rule for rule.

    For each tool-call id, the first event that mentions it is remembered; when that id has a call
    but no result, or a result but no call, that first event loses that call or result (Sentinel's
    message of it; a second event with the same unpaired id keeps its own), and goes when nothing
    is left of it. Paired calls stay even when not adjacent, and so do the paired calls and results
    an event holds beside an unpaired one: dropping the whole event would leave their other halves
    unpaired, a history a model's API refuses.
    """
    pairings: dict[str, _Pairing] = {}
    for event in events:
        for response in event.message.tool_responses:
            pairings.setdefault(response.id, _Pairing(event.id)).has_response = True
        for call in event.message.tool_calls:
            pairings.setdefault(call.id, _Pairing(event.id)).has_request = True
    unpaired: dict[str, set[str]] = {}
    for tool_id, pairing in pairings.items():
        if pairing.has_request != pairing.has_response:
            unpaired.setdefault(pairing.first_event_id, set()).add(tool_id)
    kept: list[SessionEvent] = []
    for event in events:
        ids = unpaired.get(event.id)
        if ids is None:
            kept.append(event)
        elif (trimmed := _without_tool_ids(event, ids)) is not None:
            kept.append(trimmed)
    return kept


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
        if (trimmed := _without_tool_ids(event, every)) is not None:
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


def _without_tool_ids(event: SessionEvent, ids: Iterable[str]) -> SessionEvent | None:
    """`event` without its tool calls and tool results whose id is in `ids`: itself when it has
    none of them, a copy with the others (or with its text alone) otherwise, `None` when nothing
    is left."""
    ids = set(ids)
    message = event.message
    calls = tuple(call for call in message.tool_calls if call.id not in ids)
    responses = tuple(response for response in message.tool_responses if response.id not in ids)
    if len(calls) == len(message.tool_calls) and len(responses) == len(message.tool_responses):
        return event
    if not calls and not responses and not (message.text or "").strip():
        return None
    return replace(event, message=replace(message, tool_calls=calls, tool_responses=responses))
