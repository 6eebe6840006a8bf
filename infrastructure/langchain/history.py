"""`LedgerChatMessageHistory`: a LangChain chat message history whose messages live in the ledger.

A drop-in for langchain-postgres' `PostgresChatMessageHistory` (and any `BaseChatMessageHistory`,
under `RunnableWithMessageHistory` too): the history is a session's active window, each message an
event (`messages.py`: every langchain-core message type reads back exactly). What the ledger adds:
`clear()` is a window change (a compaction), so the history forgets while the ledger keeps every
message, archived: `get_events`, `RecallTools`, `replay` and `verify` still see them; the workers
compact a long history in the background (a summary reads back as a message); and the session
belongs to one user, whose history nobody else reads or writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage
from langchain_core.runnables.config import run_in_executor
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.errors import SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.infrastructure.async_service import AsyncSessionService
from sessionledger.infrastructure.langchain.messages import from_payload, to_event
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settling import settled
from sessionledger.infrastructure.shared_services import SHARED
from sessionledger.infrastructure.window_changes import ClearSession, change_window

APP_NAME = "langchain"
"""The app the ledger files these sessions under (its compaction policy, its `app:` state)."""

DEFAULT_USER = "langchain"
"""The owner of a history created without `user_id`."""

R = TypeVar("R")


class LedgerChatMessageHistory(BaseChatMessageHistory):
    """The chat history of session `session_id`, for user `user_id` (else `"langchain"`).

    The ledger is `database_url` as `open_service` takes it (the histories on one ledger share one
    service in the process, `shared_services.py`, as `RunnableWithMessageHistory` makes a history
    per call: `close()` / `aclose()` or `with` releases it, and the last history closes it), or
    `service`, an open `SessionService` or `AsyncSessionService` many histories may share (the
    caller closes it). The asynchronous methods go through an `AsyncSessionService` when there is
    one, so they never block the event loop (a `SessionService`'s calls run on the default
    executor). The session (app `langchain`) is created by the first write. Another user's session
    reads as an empty history and refuses writes and `clear()` (`ValueError`, nothing changes).
    """

    def __init__(
        self,
        session_id: str,
        database_url: str | None = None,
        *,
        service: SessionService | AsyncSessionService | None = None,
        user_id: str | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError("session_id must be a non-empty string")
        if user_id is not None and (not isinstance(user_id, str) or not user_id.strip()):
            raise ValueError("user_id must be a non-empty string or None")
        if service is not None and (database_url is not None or options):
            raise ValueError("give a database URL (and its options) or an open service, not both")
        if service is not None and not isinstance(service, SessionService | AsyncSessionService):
            raise ValueError(f"service must be a SessionService or an AsyncSessionService, not {service!r}")
        self.session_id = session_id
        self.user_id = DEFAULT_USER if user_id is None else user_id
        self._owns = service is None
        self._service = SHARED.acquire(database_url, options) if service is None else service
        self._closed = False
        self._mine = False
        """Whether the session is known to be this user's: then no call checks the owner again (a
        session never changes hands, and a deleted session's id is never used again)."""

    @property
    def service(self) -> SessionService | AsyncSessionService:
        """The ledger the history lives in: `get_events`, `replay`, `records` for audit and recall."""
        return self._service

    # --- BaseChatMessageHistory ---------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a read-only property
        """The window's messages, oldest first."""
        return self._call(self._read)

    async def aget_messages(self) -> list[BaseMessage]:
        return await self._acall(self._read)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages, in order, in one ledger transaction (creating the session first)."""
        events = self._events(messages)
        if events:
            self._call(lambda service: self._write(service, events))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        events = self._events(messages)
        if not events:
            return
        service = self._live
        if len(events) == 1 and self._mine and isinstance(service, AsyncSessionService):
            try:  # the ledger's fastest path, sent from the loop when it can be
                await service.append_event(events[0])
                return
            except SessionNotFound:
                pass  # deleted: `_write` says so
        await self._acall(lambda service: self._write(service, events))

    def clear(self) -> None:
        """Empty the window: the ledger keeps the messages (archived) and the record of the clear."""
        self._call(self._clear)

    async def aclear(self) -> None:
        await self._acall(self._clear)

    # --- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the ledger the history opened (not one it was given), which the last history on
        it closes; later calls raise `RuntimeError`. Never from an event loop."""
        last = self._release()
        if last is not None:
            last.close()

    async def aclose(self) -> None:
        last = self._release()
        if last is not None:
            await last.aclose()

    def _release(self) -> AsyncSessionService | None:
        """Mark the history closed: its own service, when it held the last share (to close)."""
        service = self._service
        if not self._owns or self._closed or not isinstance(service, AsyncSessionService):
            return None
        self._closed = True
        return service if SHARED.release(service) else None

    def __enter__(self) -> LedgerChatMessageHistory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> LedgerChatMessageHistory:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- the work, one service call each ------------------------------------------------------

    @property
    def _live(self) -> SessionService | AsyncSessionService:
        """The service, while the history is open."""
        if self._closed:
            raise RuntimeError("the chat message history is closed")
        return self._service

    def _call(self, work: Callable[[SessionService], R]) -> R:
        service = self._live
        return work(service.synchronous() if isinstance(service, AsyncSessionService) else service)

    async def _acall(self, work: Callable[[SessionService], R]) -> R:
        service = self._live
        if isinstance(service, AsyncSessionService):
            return await service.run(work)
        # settled: a cancel waits for the executor's call, so a write lands before the caller hears
        return await settled(run_in_executor(None, work, service))

    @property
    def _owner(self) -> str | None:
        """The user the service checks a call against: none once the session is known to be ours."""
        return None if self._mine else self.user_id

    def _events(self, messages: Sequence[BaseMessage]) -> list[SessionEvent]:
        return [to_event(self.session_id, message) for message in messages]

    def _read(self, service: SessionService) -> list[BaseMessage]:
        """The messages, built from the stored payloads in the same hop as the read."""
        return service.window_payloads(self.session_id, from_payload, user_id=self._owner)

    def _write(self, service: SessionService, events: list[SessionEvent]) -> None:
        if self._append(service, events):
            return
        try:
            service.create_session(self.user_id, session_id=self.session_id, app_name=APP_NAME)
        except SessionExists:  # another writer created it since (ours or not), or it was deleted
            if self._append(service, events):
                return
            raise  # deleted: a deleted session's id is never used again
        if not self._append(service, events):
            raise SessionNotFound(f"session {self.session_id!r} not found")

    def _append(self, service: SessionService, events: list[SessionEvent]) -> bool:
        """Append in one transaction; `False` when the session does not exist (nothing stored),
        `ValueError` when it is another user's (nothing stored)."""
        if len(events) == 1:  # the one-event path is the ledger's fastest
            try:
                service.append_event(events[0], user_id=self._owner)
            except SessionNotFound:
                return False
        else:
            outcomes = service.ingest(events, user_id=self._owner)
            if AppendOutcome.REFUSED in outcomes:
                raise ValueError(f"session {self.session_id!r} does not belong to user {self.user_id!r}")
            if AppendOutcome.NO_SESSION in outcomes:
                return False
        self._mine = True
        return True

    def _clear(self, service: SessionService) -> None:
        change_window(service, self.session_id, ClearSession(), self.user_id)
