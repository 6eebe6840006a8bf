"""`SessionMemory`: Spring AI Session's memory advisor over the ledger.

`before` finds or creates the conversation's session for the caller's user, reads its active
window under the advisor's filter, puts it in front of the request and stores the request's current
message (after the read, so the prompt does not hold it twice); `after` stores the model's replies.
The window can go in as messages (Spring) or as Sentinel's fact block: the latest summary in the
system prompt. Compaction happens in `after` only when a trigger and a strategy are given; without
them it is the workers' job (a service with a broker) or the caller's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar

from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.compaction.ports import Strategy, Trigger
from sessionledger.domain.errors import SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.ids import MAX_ID_LENGTH
from sessionledger.domain.messages import Message, MessageType, SystemMessage, UserMessage
from sessionledger.domain.prompting import build_system_prompt
from sessionledger.domain.sessions import Session
from sessionledger.infrastructure.async_service import AsyncSessionService
from sessionledger.infrastructure.service import SessionService

MessageFilter = Callable[[list[SessionEvent]], list[SessionEvent]]
"""Which of the events about to be stored are stored (the functions of `domain.memory` are ones)."""

DEFAULT_USER_ID = "default-user"
SESSION_ID_CONTEXT_KEY = "chat_memory_conversation_id"
"""The one context key of the idempotent id fingerprint (Spring's default key list)."""


def skip_empty_messages(events: list[SessionEvent]) -> list[SessionEvent]:
    """The default `message_filter`: drop assistant messages with blank text and no tool calls."""
    return [event for event in events if not _empty_reply(event.message)]


S = TypeVar("S", SessionService, AsyncSessionService)


class _SessionMemoryRules(Generic[S]):
    """The memory advisor's rules, once for both faces: each step takes the synchronous service it
    runs on (the caller's, or the async service's pool thread, reached in one hop per step)."""

    def __init__(
        self,
        service: S,
        *,
        default_user_id: str = DEFAULT_USER_ID,
        event_filter: EventFilter | None = None,
        message_filter: MessageFilter | None = None,
        trigger: Trigger | None = None,
        strategy: Strategy | None = None,
        history: Literal["messages", "facts"] = "messages",
        idempotent_ids: bool = False,
        branch: str | None = None,
        history_selector: MessageFilter | None = None,
    ) -> None:
        """`branch` puts the events it stores on that branch (a sub-agent's), and reads that branch's
        view unless `event_filter` names another; Spring's advisor writes no branch (its PR #33).
        `history_selector` is applied to the history read (Sentinel's read selectors, such as
        `domain.memory.remove_unpaired_tool_calls`), with the request's messages after it, so
        that the tool results a request brings pair their calls; by default the history is used
        as read."""
        if service is None:
            raise ValueError("service must not be None")
        _require_text(default_user_id, "default_user_id")
        if event_filter is not None and not isinstance(event_filter, EventFilter):
            raise ValueError("event_filter must be an EventFilter")
        for name, function in (("message_filter", message_filter), ("history_selector", history_selector)):
            if function is not None and not callable(function):
                raise ValueError(f"{name} must be callable")
        if (trigger is None) != (strategy is None):
            raise ValueError("trigger and strategy must be set together: set both or neither")
        if history not in ("messages", "facts"):
            raise ValueError(f"history must be 'messages' or 'facts', got {history!r}")
        self._service: S = service
        self._default_user_id = default_user_id
        self._event_filter = EventFilter.all() if event_filter is None else event_filter
        if branch is not None:
            self._event_filter = EventFilter.for_branch(branch).merge(self._event_filter)
        self._branch = branch
        self._history_selector = history_selector
        self._message_filter = skip_empty_messages if message_filter is None else message_filter
        self._trigger = trigger
        self._strategy = strategy
        self._facts = history == "facts"
        self._idempotent = idempotent_ids

    def _before(
        self,
        service: SessionService,
        conversation_id: str,
        messages: list[Message],
        user_id: str | None,
        event_filter: EventFilter | None,
    ) -> list[Message]:
        """`before`, on `service`."""
        _require_text(conversation_id, "conversation_id")
        messages = _checked_messages(messages, "messages")
        if user_id is not None:
            _require_text(user_id, "user_id")
        if event_filter is not None and not isinstance(event_filter, EventFilter):
            raise ValueError("event_filter must be an EventFilter or None")
        self._session_for(service, conversation_id, user_id)
        search = self._event_filter if event_filter is None else self._event_filter.merge(event_filter)
        events = service.get_events(conversation_id, search.merge(EventFilter.active()))
        if self._history_selector is not None:
            events = _selected(self._history_selector, events, conversation_id, messages)
        if self._facts:
            history = [event.message for event in events if not event.is_synthetic]
        else:
            history = [event.message for event in events]
        combined = _systems_first(history + messages)
        if self._facts:
            combined = _with_facts(combined, conversation_id, events)
        self._store(service, conversation_id, [_current(messages)])
        return combined

    def _after(
        self, service: SessionService, conversation_id: str, replies: list[Message], user_id: str | None
    ) -> None:
        """`after`, on `service`."""
        _require_text(conversation_id, "conversation_id")
        replies = _checked_messages(replies, "replies")
        if user_id is not None:
            _require_text(user_id, "user_id")
        if not self._store(service, conversation_id, replies, user_id):
            session = service.get_session(conversation_id)
            if session is None:
                raise ValueError(f"Session '{conversation_id}' not found: before() creates it")
            if user_id is not None:
                _check_owner(session, user_id)
        if self._trigger is not None and self._strategy is not None:
            service.compact(conversation_id, self._trigger, self._strategy)

    def _session_for(self, service: SessionService, conversation_id: str, user_id: str | None) -> None:
        """Spring's find-or-create, with the access check when the caller names a user."""
        session = service.get_session(conversation_id)
        if session is None:
            try:
                service.create_session(user_id or self._default_user_id, session_id=conversation_id)
                return
            except SessionExists:
                session = service.get_session(conversation_id)  # created meanwhile?
                if session is None:
                    raise
        if user_id is not None:
            _check_owner(session, user_id)

    def _store(
        self,
        service: SessionService,
        conversation_id: str,
        messages: Sequence[Message],
        user_id: str | None = None,
    ) -> bool:
        """Append what `message_filter` keeps, in one transaction; whether there was anything.

        With `user_id`, another user's session refuses them all (`ValueError`, nothing stored).
        """
        events = [
            SessionEvent(
                session_id=conversation_id,
                message=message,
                branch=self._branch,
                **self._id_of(conversation_id, message),
            )
            for message in messages
        ]
        kept = self._message_filter(events)
        if not kept:
            return False
        if len(kept) == 1:  # the single-event path is the ledger's quickest
            try:
                service.append_event(kept[0], user_id=user_id)
            except SessionNotFound:
                raise ValueError(f"Session '{conversation_id}' not found: before() creates it") from None
            return True
        outcomes = service.ingest(kept, user_id=user_id)
        if AppendOutcome.NO_SESSION in outcomes:
            raise ValueError(f"Session '{conversation_id}' not found: before() creates it")
        if AppendOutcome.REFUSED in outcomes:
            raise ValueError(
                f"Session '{conversation_id}' does not belong to user '{user_id}'. Access denied."
            )
        return True

    def _id_of(self, conversation_id: str, message: Message) -> dict[str, Any]:
        if not self._idempotent:
            return {}
        return {"id": idempotent_event_id(conversation_id, message)}


class SessionMemory(_SessionMemoryRules[SessionService]):
    """Spring's `SessionMemoryAdvisor` as an advisor (`before` / `after`), on a `SessionService`."""

    def before(
        self,
        conversation_id: str,
        messages: list[Message],
        *,
        user_id: str | None = None,
        event_filter: EventFilter | None = None,
    ) -> list[Message]:
        """The prompt to send: the window (or its fact block), then `messages`, system messages first.

        Stores the last user or tool message of `messages` (`UserMessage("")` when there is none, as
        Spring does). A session of another user is a `ValueError` naming both, and nothing is stored.
        """
        return self._before(self._service, conversation_id, messages, user_id, event_filter)

    def after(self, conversation_id: str, replies: list[Message], *, user_id: str | None = None) -> None:
        """Store the replies `message_filter` keeps, in order and in one transaction, then compact
        when a trigger and a strategy were given."""
        self._after(self._service, conversation_id, replies, user_id)


class AsyncSessionMemory(_SessionMemoryRules[AsyncSessionService]):
    """`SessionMemory` on an `AsyncSessionService`: the same arguments and rules, `before` and `after`
    coroutines, each one hop to the service's pool (reads and writes together), so the loop never
    waits on the database."""

    async def before(
        self,
        conversation_id: str,
        messages: list[Message],
        *,
        user_id: str | None = None,
        event_filter: EventFilter | None = None,
    ) -> list[Message]:
        """`SessionMemory.before`."""
        return await self._service.run(
            lambda service: self._before(service, conversation_id, messages, user_id, event_filter)
        )

    async def after(
        self, conversation_id: str, replies: list[Message], *, user_id: str | None = None
    ) -> None:
        """`SessionMemory.after`."""
        await self._service.run(lambda service: self._after(service, conversation_id, replies, user_id))


def idempotent_event_id(conversation_id: str, message: Message) -> str:
    """Spring's `IdempotentSessionEventIdGenerator` id for a message of this conversation.

    The fingerprint is the conversation id; tool calls and results are named by their call ids,
    any other message by a SHA-256 of its type and text. An id longer than the ledger takes (many
    tool calls) becomes `sha256:` and the hash of that id: still the same for a retried turn.
    """
    fingerprint = f"{SESSION_ID_CONTEXT_KEY}:{conversation_id}"
    if message.tool_calls:
        derived = f"{fingerprint}:toolcall:" + ",".join(call.id for call in message.tool_calls)
    elif message.type is MessageType.TOOL:
        derived = f"{fingerprint}:toolresp:" + ",".join(r.id for r in message.tool_responses)
    else:
        kind = message.type.name
        digest = hashlib.sha256(f"{fingerprint}:{kind}:{message.text or ''}".encode()).hexdigest()
        derived = f"{fingerprint}:{kind}:{digest}"
    if len(derived) > MAX_ID_LENGTH:
        return "sha256:" + hashlib.sha256(derived.encode()).hexdigest()
    return derived


def _empty_reply(message: Message) -> bool:
    return (
        message.type is MessageType.ASSISTANT and not message.tool_calls and not (message.text or "").strip()
    )


def _require_text(value: object, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")


def _checked_messages(messages: object, name: str) -> list[Message]:
    if messages is None:
        raise ValueError(f"{name} must not be None")
    if isinstance(messages, Message | str | bytes) or not isinstance(messages, Sequence):
        raise ValueError(f"{name} must be a list of Message values")
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise ValueError(f"{name}[{index}] must be a Message, got {type(message).__name__}")
    return list(messages)


def _check_owner(session: Session, user_id: str) -> None:
    if session.user_id != user_id:
        raise ValueError(f"Session '{session.id}' does not belong to user '{user_id}'. Access denied.")


def _current(messages: list[Message]) -> Message:
    """The last user or tool message of the request, else Spring's fallback `UserMessage("")`."""
    for message in reversed(messages):
        if message.type in (MessageType.USER, MessageType.TOOL):
            return message
    return UserMessage("")


def _systems_first(messages: list[Message]) -> list[Message]:
    systems = [m for m in messages if m.type is MessageType.SYSTEM]
    return systems + [m for m in messages if m.type is not MessageType.SYSTEM]


def _with_facts(messages: list[Message], conversation_id: str, events: list[SessionEvent]) -> list[Message]:
    """The latest summary as Sentinel's fact block, added to the first system message (or as one)."""
    if messages and messages[0].type is MessageType.SYSTEM:
        first = messages[0]
        prompt = build_system_prompt(first.text or "", conversation_id, events)
        return (
            [SystemMessage(prompt, metadata=first.metadata), *messages[1:]]
            if prompt != first.text
            else messages
        )
    prompt = build_system_prompt("", conversation_id, events)
    return [SystemMessage(prompt), *messages] if prompt else messages


def _selected(
    selector: MessageFilter,
    history: list[SessionEvent],
    conversation_id: str,
    messages: list[Message],
) -> list[SessionEvent]:
    """The history `selector` keeps, chosen with the request's messages after it (not yet stored):
    a tool call the request answers is paired, not taken for one left unanswered."""
    pending = [SessionEvent(session_id=conversation_id, message=message) for message in messages]
    sent = {event.id for event in pending}
    return [event for event in selector([*history, *pending]) if event.id not in sent]
