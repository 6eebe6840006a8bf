"""`LedgerSessionService`: a google-adk `BaseSessionService` whose sessions live in the ledger.

One line changes in an ADK application (`InMemorySessionService()` or `DatabaseSessionService(url)`
becomes `LedgerSessionService(url)`), and its events and state become ledger records: compacted by
the workers, verifiable, replayable, and never lost to a concurrent writer. The ledger does the
work through `AsyncSessionService`, each call one hop to its thread pool; this module only
translates google-adk's keys, events, errors and staleness rule.

Staleness is google-adk's: a `Session` object remembers the ledger's `event_version` it was read
at (google-adk's private `_storage_update_marker`), and appending through a copy that missed
another writer's event (or a rewind, or a deletion) raises `StaleSessionError`. The check is the
ledger's conditional append (`expected_version`), so it holds across processes at the cost of no
extra round trip. A compaction by the workers moves the version too, but misses nothing the caller
wrote, so it never makes a session stale (google-adk's background compaction did: issue #5194).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from uuid import uuid4

from google.adk.errors import InvocationNotFoundError, StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from sessionledger.domain.errors import ConcurrencyConflict, SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.records import Kind, compaction_writes
from sessionledger.domain.sessions import Session as LedgerSession
from sessionledger.infrastructure.adk.events import (
    ADK_KEY,
    adk_json,
    json_safe,
    thaw,
    timestamp_of,
    to_adk,
    to_ledger,
)
from sessionledger.infrastructure.adk.ids import ledger_session_id
from sessionledger.infrastructure.async_service import AsyncSessionService, open_async_service
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settling import settled
from typing_extensions import override

STALE_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
"""google-adk's own text, so code that matches on it keeps working."""

ADK_SESSION_ID = "adk_session_id"
"""Session metadata: the id google-adk knows the session by."""

_LAST_APPENDED = EventFilter(exclude_synthetic=True, last_n=1)
"""The event appended last (archived or not): what google-adk's `last_update_time` follows."""

APPEND_ATTEMPTS = 5
"""Conditional appends tried while only compactions move the version, before giving up as stale."""

_STALE_KINDS = frozenset({Kind.EVENT, Kind.REWIND, Kind.ERASURE})
"""Records that change what a session object shows; a compaction only shortens the window."""


class LedgerSessionService(BaseSessionService):
    """google-adk's session service on the ledger (`open_service`'s arguments).

    Sessions are keyed as google-adk keys them, by `(app_name, user_id, session_id)`; session ids
    are stripped of surrounding blanks, and expire only when the operator sets `session_ttl`.
    `service` is the `AsyncSessionService` underneath, for the ledger's own operations (compact,
    records, replay, verify).
    """

    def __init__(self, database_url: str | None = None, *, broker_url: str | None = None, **options: Any):
        super().__init__()
        self._service = open_async_service(database_url, broker_url=broker_url, **options)
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def service(self) -> AsyncSessionService:
        return self._service

    @staticmethod
    def ledger_id(app_name: str, user_id: str, session_id: str) -> str:
        """The ledger's session id for google-adk's key (for the ledger's own tools)."""
        return ledger_session_id(app_name, user_id, session_id.strip())

    async def close(self) -> None:
        """Wait for the calls in flight and close the ledger."""
        await self._service.aclose()

    async def __aenter__(self) -> LedgerSessionService:
        await self._service.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- sessions ------------------------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id or "").strip() or str(uuid4())
        key = ledger_session_id(app_name, user_id, session_id)
        initial = json_safe(state or {})  # the ledger drops the `temp:` keys

        def create(service: SessionService) -> LedgerSession:
            if service.get_session(key) is not None:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            try:
                return service.create_session(
                    user_id,
                    session_id=key,
                    app_name=app_name,
                    metadata={ADK_SESSION_ID: session_id},
                    state=initial,
                )
            except SessionExists:  # created meanwhile, or deleted: the ledger never reuses an id
                raise AlreadyExistsError(
                    f"Session with id {session_id} already exists (or existed: a deleted "
                    "session's id is not reused)."
                ) from None

        created = await self._service.run(create)
        return _adk_session(session_id, created, [], created.created_at.timestamp(), version=0)

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = session_id.strip()
        if not session_id:
            return None
        key = ledger_session_id(app_name, user_id, session_id)
        recent = config.num_recent_events if config else None
        window = EventFilter.active() if not recent else EventFilter(exclude_archived=True, last_n=recent)

        def read(service: SessionService) -> tuple[LedgerSession, int, list[SessionEvent], float] | None:
            found = service.get_session(key)
            if found is None or not _names(found, app_name, user_id, session_id):
                return None
            version = service.event_version(key)
            events = service.get_events(key, window) if recent != 0 else []
            return found, version, events, _last_update(service, key, events, found)

        got = await self._service.run(read)
        if got is None:
            return None
        found, version, stored, last_update = got
        events = to_adk(stored)
        if config is not None and config.after_timestamp is not None:
            events = [e for e in events if e.timestamp >= config.after_timestamp]
        return _adk_session(session_id, found, events, last_update, version)

    @override
    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        def read(service: SessionService) -> list[tuple[LedgerSession, float]]:
            if user_id is not None:
                found = service.list_sessions(user_id, app_name=app_name)
            else:
                found = _every_session(service, app_name)
            ours = [s for s in found if ADK_SESSION_ID in s.metadata]
            return [(s, _last_update(service, s.id, [], s)) for s in ours]

        listed = await self._service.run(read)
        sessions = [_adk_session(s.metadata[ADK_SESSION_ID], s, [], at, None) for s, at in listed]
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        session_id = session_id.strip()
        if not session_id:
            return
        key = ledger_session_id(app_name, user_id, session_id)

        def delete(service: SessionService) -> None:
            found = service.get_session(key)
            if found is not None and _names(found, app_name, user_id, session_id):
                service.delete_session(key, user_id=user_id)

        await self._service.run(delete)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        state = await self._service.get_user_state(user_id, app_name=app_name)
        return dict(thaw(state))

    # --- events --------------------------------------------------------------------------------

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        """google-adk's append; a cancel waits until the event is stored and `session` shows it, or
        neither (`settling.py`), so the caller's copy never disagrees with the ledger."""
        return await settled(self._append_event(session, event))

    async def _append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        key = ledger_session_id(session.app_name, session.user_id, session.id)
        rewind_to = event.actions.rewind_before_invocation_id if event.actions else None

        def write(service: SessionService) -> str | None:
            # converted on the pool thread, in the one hop: the event loop only waits
            record = to_ledger(_without_temp(event), key)
            if rewind_to is not None:  # the ledger's rewind sets the state; the event only marks it
                record = replace(record, state_delta={})
            return _write(service, session, key, record, rewind_to)

        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            marker = await self._append_current(session, key, event) if rewind_to is None else None
            if marker is None:
                marker = await self._service.run(write)
        if marker is None:  # this very event was stored before: an idempotent redelivery
            return event
        # as google-adk's services: the caller's objects change only once the event is stored
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        session._storage_update_marker = marker
        if rewind_to is not None:
            await self._resync_state(session, key)
        return event

    async def _append_current(self, session: Session, key: str, event: Event) -> str | None:
        """The common append from the event loop (no thread hop): a copy that knows its version,
        appended at it. Its new marker, or `None` for `_write` to decide (a stale copy or a
        compaction since, an unknown session, an event id used before)."""
        marker = session._storage_update_marker
        if marker is None or not marker.isdigit():
            return None
        try:
            stored = await self._service.append_event(
                to_ledger(_without_temp(event), key), expected_version=int(marker)
            )
        except (ConcurrencyConflict, SessionNotFound):
            return None
        return str(int(marker) + 1) if stored else None

    async def _resync_state(self, session: Session, key: str) -> None:
        """After a rewind: the stored state (the ledger keeps the initial state google-adk loses),
        and the invocation's `temp:` keys."""
        stored = await self._service.get_session(key)
        if stored is not None:
            temp = {k: v for k, v in session.state.items() if k.startswith(State.TEMP_PREFIX)}
            session.state = {**thaw(stored.state), **temp}


def _without_temp(event: Event) -> Event:
    """The event as stored: without its `temp:` keys (the caller's event is trimmed once stored)."""
    delta = event.actions.state_delta if event.actions else None
    if not delta or not any(key.startswith(State.TEMP_PREFIX) for key in delta):
        return event
    kept = {k: v for k, v in delta.items() if not k.startswith(State.TEMP_PREFIX)}
    return event.model_copy(update={"actions": event.actions.model_copy(update={"state_delta": kept})})


def _write(
    service: SessionService, session: Session, key: str, record: SessionEvent, rewind_to: str | None
) -> str | None:
    """Store the event if the caller's copy is current (one thread hop); the new marker, or `None`
    when an equal event with this id was stored before.

    The append is conditional on the version the copy remembers, checked in the ledger's own
    write: one round trip when nothing else wrote. When the version moved, the records since tell
    a compaction (retry at the new version) from another writer (`StaleSessionError`).
    """
    marker = session._storage_update_marker
    expected = int(marker) if marker is not None and marker.isdigit() else None
    try:
        if rewind_to is not None:
            _current_version(service, session, key)  # a stale copy may not rewind either
            version = _rewind(service, key, rewind_to)
            return _stored(service, key, record, service.append_event(record), version)
        for _ in range(APPEND_ATTEMPTS):
            if expected is None:
                expected = _current_version(service, session, key)
            try:
                stored = service.append_event(record, expected_version=expected)
            except ConcurrencyConflict:
                expected = None
                continue
            return _stored(service, key, record, stored, expected)
    except SessionNotFound:
        raise SessionNotFoundError(f"Session {session.id} not found.") from None
    raise StaleSessionError(STALE_MESSAGE)


def _current_version(service: SessionService, session: Session, key: str) -> int:
    """The session's version, once the caller's copy is known to be current (`_check_fresh`)."""
    version = service.event_version(key)
    if session._storage_update_marker != str(version):
        _check_fresh(service, session, key)
    return version


def _rewind(service: SessionService, key: str, target: str) -> int:
    """The ledger's rewind (its new version); the rewind event itself is appended after it."""
    try:
        return service.rewind(key, target)
    except SessionNotFound:
        raise  # a LookupError too, answered by the caller
    except LookupError:
        raise InvocationNotFoundError(f"Invocation ID not found: {target}") from None


def _stored(
    service: SessionService, key: str, record: SessionEvent, stored: bool, version: int
) -> str | None:
    """The marker after an append at `version`, or `None` for a redelivered event."""
    if not stored:
        _same_as_stored(service, key, record)
        return None
    return str(version + 1)


def _names(found: LedgerSession, app_name: str, user_id: str, session_id: str) -> bool:
    """Whether the ledger session at an ADK key is the ADK session the key names: the APIs that
    take a raw session id (the core service, openai-agents, LangGraph) may have made one with the
    same id for another user or app, which must read here as missing and stay as it is."""
    return (found.user_id, found.app_name, found.metadata.get(ADK_SESSION_ID)) == (
        user_id,
        app_name,
        session_id,
    )


def _check_fresh(service: SessionService, session: Session, key: str) -> None:
    """`StaleSessionError` unless the ledger changed since `session` was read only by the caller's
    own events and by compactions (which shorten the window and lose nothing; the summaries they
    write are theirs, `records.compaction_writes`)."""
    found = service.get_session(key)
    if found is None or not _names(found, session.app_name, session.user_id, session.id):
        raise SessionNotFoundError(f"Session {session.id} not found.")
    marker = session._storage_update_marker
    if marker is None or not marker.isdigit():  # built by hand: compare the last events instead
        last = service.get_events(key, _LAST_APPENDED)
        mine = session.events[-1].id if session.events else None
        if (last[-1].id if last else None) != mine:
            raise StaleSessionError(STALE_MESSAGE)
        return
    seen = int(marker)
    known = {event.id for event in session.events}
    records = [record for record in service.records(key) if record.version > seen]
    summaries = {position for record in records for position in compaction_writes(record)}
    for record in records:
        if record.kind in _STALE_KINDS and record.event_id not in known and record.position not in summaries:
            raise StaleSessionError(STALE_MESSAGE)


def _same_as_stored(service: SessionService, key: str, record: SessionEvent) -> None:
    """An event id is the ledger's idempotency key: re-delivering the same event is a no-op, and
    a different event with a used id is a `ValueError` (the ledger cannot hold both)."""
    stored = next((e for e in service.get_events(key) if e.id == record.id), None)
    same = (  # compared as objects: the ledger may hold the older object form
        stored is not None
        and ADK_KEY in stored.metadata
        and adk_json(stored.metadata[ADK_KEY]) == adk_json(record.metadata[ADK_KEY])
    )
    if not same:
        raise ValueError(f"event id {record.id!r} is already used by another event of session {key!r}")


def _last_update(
    service: SessionService, key: str, window: Sequence[SessionEvent], session: LedgerSession
) -> float:
    """google-adk's `last_update_time`: the timestamp of the event appended last, else the creation."""
    last = next((e for e in reversed(window) if ADK_KEY in e.metadata), None)
    if last is None:
        found = service.get_events(key, _LAST_APPENDED)
        last = found[-1] if found else None
    if last is None:
        return session.created_at.timestamp()
    return timestamp_of(last)  # never a summary, whose ADK form is built from its neighbours


def _adk_session(
    session_id: str, stored: LedgerSession, events: list[Event], last_update: float, version: int | None
) -> Session:
    session = Session(
        id=session_id,
        app_name=stored.app_name,
        user_id=stored.user_id,
        state=thaw(stored.state),
        events=events,
        last_update_time=last_update,
    )
    session._storage_update_marker = None if version is None else str(version)
    return session


def _every_session(service: SessionService, app_name: str) -> list[LedgerSession]:
    """Every user's sessions of the app, through the service's operator listing, page by page (a
    session created meanwhile shifts the pages: it may be met twice, and is kept once)."""
    found: dict[str, LedgerSession] = {}
    page, offset = 1000, 0
    while batch := service.recent_sessions(app_name=app_name, limit=page, offset=offset):
        found.update((s.id, s) for s in batch)
        if len(batch) < page:
            break
        offset += page
    return list(found.values())
