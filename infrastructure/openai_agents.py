"""`LedgerSession`: an openai-agents `Session` whose history lives in the ledger (extra `openai-agents`).

A drop-in for the SDK's `SQLiteSession` / `SQLAlchemySession`: the same four operations and
`session_settings`, over the `AsyncSessionService`. What the ledger adds: concurrent `add_items` lose
nothing (each is one ledger append or batch), the workers compact long histories in the background
(a summary reads back as a message item), and `pop_item` / `clear_session` are ledger records (a
window change), so the window forgets while `replay`, `verify` and `records` still see every item.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, cast

import orjson
from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.compaction import CompactionResult
from sessionledger.domain.compaction.ports import Strategy
from sessionledger.domain.errors import SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.response_items import event_item, item_event, payload_item
from sessionledger.infrastructure.async_service import AsyncSessionService
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.shared_services import SHARED
from sessionledger.infrastructure.window_changes import ClearSession, PopItem, change_window

APP_NAME = "openai-agents"
"""The app the ledger files these sessions under (its compaction policy, its `app:` state)."""

DEFAULT_USER = "openai-agents"
"""The owner of a session created without `user_id`."""

_ITEM_OF_PAYLOAD = functools.partial(payload_item, fast_loads=orjson.loads)
"""A stored payload's item, orjson parsing the exact JSON text it may hold."""


class LedgerSession:
    """An openai-agents `Session` over the ledger: `LedgerSession(session_id)` where the SDK's
    examples write `SQLiteSession(session_id)`.

    `database_url`, `broker_url` and `options` are `open_service`'s (the default: the
    `SESSIONLEDGER_DATABASE_URL` ledger, else `./sessionledger.db`). With `user_id`, the session is
    that user's: another user's session with this id reads as empty and refuses writes
    (`ValueError`). The ledger session (app `openai-agents`, no expiry unless the operator sets
    `session_ttl`) is created by the first `add_items`. Call `await close()` when done.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        database_url: str | None = None,
        broker_url: str | None = None,
        user_id: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.session_id = session_id
        self.user_id = user_id
        self.session_settings = (
            SessionSettings() if session_settings is None else coerce_session_settings(session_settings)
        )
        self._service = SHARED.acquire(database_url, options, broker_url)
        self._closed = False

    @property
    def service(self) -> AsyncSessionService:
        """The ledger this session lives in: `replay`, `records`, `get_events` for audit and recall."""
        return self._service

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("LedgerSession is closed")

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The window's items, oldest first; the newest `limit` (else `session_settings.limit`)
        when it is set; `limit=0` is none, a negative limit is all (as in `SQLiteSession`)."""
        self._check_open()
        limit = resolve_session_limit(limit, self.session_settings)
        if limit == 0:
            return []
        session_id, user_id = self.session_id, self.user_id

        def read(service: SessionService) -> list[Any]:
            """The items, built in the same hop as the read, so the event loop only hands it over."""
            if limit is not None and limit > 0:  # the newest `limit`: a read whose cost follows `limit`
                newest = EventFilter(exclude_archived=True, last_n=limit)
                events = service.get_events(session_id, newest, user_id=user_id)
                return [event_item(event, orjson.loads) for event in events]
            # the whole window: only the payloads the items are rebuilt from, no events
            return service.window_payloads(session_id, _ITEM_OF_PAYLOAD, user_id=user_id)

        return cast("list[TResponseInputItem]", await self._service.run(read))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, in order, in one ledger transaction (creating the session first)."""
        self._check_open()
        if not items:
            return
        session_id, user_id = self.session_id, self.user_id
        events = [item_event(session_id, cast("Mapping[str, Any]", item)) for item in items]

        def store(service: SessionService) -> None:
            if _append(service, events, user_id):
                return
            try:
                service.create_session(user_id or DEFAULT_USER, session_id=session_id, app_name=APP_NAME)
            except SessionExists:  # another writer created it since, which is fine, or it was deleted
                if _append(service, events, user_id):
                    return
                raise  # deleted: a deleted session's id is never used again
            if not _append(service, events, user_id):
                raise SessionNotFound(f"session {session_id!r} not found")

        if len(events) == 1:  # the ledger's fastest path, sent from the loop when it can be
            try:
                await self._service.append_event(events[0], user_id=user_id)
                return
            except SessionNotFound:
                pass  # created below
        await self._service.run(store)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the newest item out of the window and return it; `None` when there is none."""
        self._check_open()
        result = await self._window_change(PopItem())
        if result is None or not result.archived:
            return None
        return cast(TResponseInputItem, event_item(result.archived[-1], orjson.loads))

    async def clear_session(self) -> None:
        """Empty the window (the ledger keeps the items, and the record that they were cleared)."""
        self._check_open()
        await self._window_change(ClearSession())

    async def _window_change(self, change: Strategy) -> CompactionResult | None:
        """Apply `change` to the window as a compaction; `None` for an unknown session."""
        session_id, user_id = self.session_id, self.user_id
        return await self._service.run(lambda service: change_window(service, session_id, change, user_id))

    async def close(self) -> None:
        """Release the ledger (closed with the last session on it); later calls raise `RuntimeError`."""
        if self._closed:
            return
        self._closed = True
        if SHARED.release(self._service):
            await self._service.aclose()


def _append(service: SessionService, events: list[SessionEvent], user_id: str | None) -> bool:
    """Append in one transaction; `False` when the session does not exist (nothing stored)."""
    if len(events) == 1:  # the one-event path is the ledger's fastest
        try:
            service.append_event(events[0], user_id=user_id)
        except SessionNotFound:
            return False
        return True
    outcomes = service.ingest(events, user_id=user_id)
    if AppendOutcome.REFUSED in outcomes:
        raise ValueError(f"session {events[0].session_id!r} does not belong to user {user_id!r}")
    return AppendOutcome.NO_SESSION not in outcomes
