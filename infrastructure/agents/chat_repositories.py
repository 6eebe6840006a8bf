"""Where a chat memory keeps conversations: in process memory, or in the ledger (which never destroys)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.chat_window import checked_id, checked_messages
from sessionledger.domain.compaction import CompactionRequest, CompactionResult
from sessionledger.domain.errors import ConcurrencyConflict, SessionExists
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import Message
from sessionledger.domain.sessions import Session
from sessionledger.infrastructure.async_service import AsyncSessionService
from sessionledger.infrastructure.service import SessionService

S = TypeVar("S", SessionService, AsyncSessionService)


class InMemoryChatMemoryRepository:
    """Spring's `InMemoryChatMemoryRepository`: a dict of lists, read as copies, lost with the process."""

    def __init__(self) -> None:
        self._conversations: dict[str, list[Message]] = {}
        self._lock = threading.Lock()

    def find_conversation_ids(self) -> list[str]:
        with self._lock:
            return list(self._conversations)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        checked_id(conversation_id)
        with self._lock:
            return list(self._conversations.get(conversation_id, ()))

    def save_all(self, conversation_id: str, messages: Iterable[Message]) -> None:
        replacement = checked_messages(messages)
        self.update(conversation_id, lambda _: replacement)

    def update(self, conversation_id: str, change: Callable[[list[Message]], list[Message]]) -> None:
        """Replace the conversation with `change(its messages)`, under the lock."""
        checked_id(conversation_id)
        with self._lock:
            current = list(self._conversations.get(conversation_id, ()))
            self._conversations[conversation_id] = checked_messages(change(current))

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        checked_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)


class AsyncInMemoryChatMemoryRepository:
    """`InMemoryChatMemoryRepository` with coroutine methods, for `AsyncMessageWindowChatMemory`
    (its default): each step holds the lock for a dict operation, never long enough to stall a loop."""

    def __init__(self) -> None:
        self._repository = InMemoryChatMemoryRepository()

    async def find_conversation_ids(self) -> list[str]:
        return self._repository.find_conversation_ids()

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return self._repository.find_by_conversation_id(conversation_id)

    async def save_all(self, conversation_id: str, messages: Iterable[Message]) -> None:
        self._repository.save_all(conversation_id, messages)

    async def update(self, conversation_id: str, change: Callable[[list[Message]], list[Message]]) -> None:
        self._repository.update(conversation_id, change)

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        self._repository.delete_by_conversation_id(conversation_id)


class _LedgerRepositoryRules(Generic[S]):
    """The ledger repository's rules, once for both faces: each step takes the synchronous service
    it runs on (the caller's, or the async service's pool thread, one hop a step)."""

    def __init__(self, service: S, *, user_id: str = "default-user", app_name: str = "chat-memory") -> None:
        for name, value in (("user_id", user_id), ("app_name", app_name)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string")
        self._service: S = service
        self._user_id = user_id
        self._app_name = app_name

    @property
    def user_id(self) -> str:
        return self._user_id

    def _find_conversation_ids(self, service: SessionService) -> list[str]:
        return [
            session.id
            for session in service.list_sessions(self._user_id, app_name=self._app_name)
            if (stats := service.window_stats(session.id)) is not None and stats.events
        ]

    def _find_by_conversation_id(self, service: SessionService, conversation_id: str) -> list[Message]:
        if self._owned(service, checked_id(conversation_id)) is None:
            return []
        return service.get_messages(conversation_id, user_id=self._user_id)

    def _update(
        self, service: SessionService, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> None:
        checked_id(conversation_id)
        if self._owned(service, conversation_id) is None:
            if not checked_messages(change([])):
                return
            self._create(service, conversation_id)
        replacing = _Replacement(conversation_id, change)
        while True:  # each lost round is a write another writer made first: the loop ends
            version = service.event_version(conversation_id)
            try:
                result = service.compact(conversation_id, replacing, replacing, user_id=self._user_id)
            except ConcurrencyConflict:
                continue
            if result.archived or not replacing.appended:  # the compaction wrote the whole change
                return
            if _appended_at(service, conversation_id, replacing.appended, version):
                return  # nothing left the window and no compaction was written: appended instead

    def _delete(self, service: SessionService, conversation_id: str) -> None:
        if self._owned(service, checked_id(conversation_id)) is not None:
            self._update(service, conversation_id, lambda _: [])

    def _owned(self, service: SessionService, conversation_id: str) -> Session | None:
        """The conversation's session; `None` when there is none; `ValueError` for another user's."""
        session = service.get_session(conversation_id)
        if session is not None and session.user_id != self._user_id:
            raise ValueError(f"conversation {conversation_id!r} does not belong to user {self._user_id!r}")
        return session

    def _create(self, service: SessionService, conversation_id: str) -> None:
        try:
            service.create_session(self._user_id, session_id=conversation_id, app_name=self._app_name)
        except SessionExists:
            if self._owned(service, conversation_id) is None:  # not created meanwhile by another
                raise  # writer: a deleted session's id, which the ledger never hands out again


class LedgerChatMemoryRepository(_LedgerRepositoryRules[SessionService]):
    """A chat-memory repository over the ledger: a conversation is a session of `user_id` in
    `app_name`, its messages that session's active window.

    `save_all` (and `update`, whose replacement is computed from the window the compaction reads)
    replaces the window with one compaction (the ledger's version check included): messages
    already in the window, in the same order, stay as they are; the others leave the window
    archived, so they remain in the ledger, searchable (`get_events`) and replayable; the new ones
    are appended. A compaction that loses to concurrent ones is computed again from the window
    it then reads, so each new message is written once and no conflict reaches the caller.
    `delete_by_conversation_id` archives the whole window: the conversation is then neither listed
    nor found, its history stays in the ledger, and its id can be saved again. A conversation of
    another user is neither readable nor writable (`ValueError`, nothing changes).
    """

    def find_conversation_ids(self) -> list[str]:
        """The user's conversations in this app with a non-empty window, oldest first."""
        return self._find_conversation_ids(self._service)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return self._find_by_conversation_id(self._service, conversation_id)

    def save_all(self, conversation_id: str, messages: Iterable[Message]) -> None:
        replacement = checked_messages(messages)
        self._update(self._service, conversation_id, lambda _: replacement)

    def update(self, conversation_id: str, change: Callable[[list[Message]], list[Message]]) -> None:
        """Replace the window with `change(its messages)`, as read by the compaction that writes it."""
        self._update(self._service, conversation_id, change)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        self._delete(self._service, conversation_id)


class AsyncLedgerChatMemoryRepository(_LedgerRepositoryRules[AsyncSessionService]):
    """`LedgerChatMemoryRepository` on an `AsyncSessionService`: the same arguments and rules, every
    method a coroutine run in one hop to the service's pool (a whole `update` included)."""

    async def find_conversation_ids(self) -> list[str]:
        return await self._service.run(self._find_conversation_ids)

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return await self._service.run(
            lambda service: self._find_by_conversation_id(service, conversation_id)
        )

    async def save_all(self, conversation_id: str, messages: Iterable[Message]) -> None:
        replacement = checked_messages(messages)
        await self._service.run(lambda service: self._update(service, conversation_id, lambda _: replacement))

    async def update(self, conversation_id: str, change: Callable[[list[Message]], list[Message]]) -> None:
        await self._service.run(lambda service: self._update(service, conversation_id, change))

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        await self._service.run(lambda service: self._delete(service, conversation_id))


def _appended_at(
    service: SessionService, conversation_id: str, events: list[SessionEvent], version: int
) -> bool:
    """Append `events` in one transaction while the conversation is still at `version`, the one
    read before its window was: `False` (nothing stored) when another writer wrote meanwhile, so
    that a change computed from an older window never lands on a newer one (two `add`s at once
    would each keep `max_messages` and together hold more)."""
    steps = service.append_steps
    drafts = [steps.draft_event(event, version + n) for n, event in enumerate(events)]
    outcomes = steps.store_entries(conversation_id, drafts, len(drafts))
    if AppendOutcome.CONFLICT in outcomes:
        return False
    if any(outcome is not AppendOutcome.STORED for outcome in outcomes):
        raise ValueError(f"conversation {conversation_id!r} could not be written: {outcomes}")
    return True


class _Replacement:
    """Trigger and strategy of one `update`: always fires; computes the replacement from the window
    it is given, keeps, in order, the window events that match the replacement's leading messages,
    archives the others and adds the rest as new events after them (`appended`, for when nothing
    leaves the window and no compaction is written). Events another writer appends while the
    compaction is written follow the new window."""

    def __init__(self, session_id: str, change: Callable[[list[Message]], list[Message]]) -> None:
        self._session_id = session_id
        self._change = change
        self.appended: list[SessionEvent] = []

    def should_compact(self, request: CompactionRequest) -> bool:
        return True

    def compact(self, request: CompactionRequest) -> CompactionResult:
        window = request.events
        messages = checked_messages(self._change([event.message for event in window]))
        kept: set[str] = set()
        start = matched = 0
        for message in messages:
            found = next((i for i in range(start, len(window)) if window[i].message == message), None)
            if found is None:
                break
            kept.add(window[found].id)
            start, matched = found + 1, matched + 1
        archived = tuple(event for event in window if event.id not in kept)
        self.appended = [
            SessionEvent(session_id=self._session_id, message=message, id=str(uuid.uuid4()))
            for message in messages[matched:]
        ]
        return CompactionResult((*(e for e in window if e.id in kept), *self.appended), archived)
