"""`SessionService`: the public API (docs/api.md "SessionService"), one implementation over any `Ledger`.

The service owns validation, state scoping, time-to-live and the compaction loop; the ledger
owns storage and its concurrency rules. Every backend therefore behaves the same by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from uuid import uuid4

from sessionledger.domain.append_outcomes import AppendOutcome, Tally
from sessionledger.domain.codec import ensure_json
from sessionledger.domain.entries import Entry, EntryRow, Forget, StoredEntry
from sessionledger.domain.errors import ConcurrencyConflict, SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import MAX_INT64, EventFilter
from sessionledger.domain.ids import check_id, check_new_id
from sessionledger.domain.mappings import freeze
from sessionledger.domain.messages import Message
from sessionledger.domain.ports import Ledger
from sessionledger.domain.records import (
    Draft,
    LedgerRecord,
    created_draft,
    entry_draft,
    event_draft,
    forgotten_draft,
)
from sessionledger.domain.replay import Projection, replay
from sessionledger.domain.sessions import DEFAULT_TTL, DefaultTtl, Session, expiry, holds_temp, strip_temp
from sessionledger.domain.times import in_utc
from sessionledger.domain.tokens import TokenCounter
from sessionledger.domain.window import WindowStats
from sessionledger.domain.write_plans import appended_event
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.tracing import APPEND, COMPACT, Span, traced

if TYPE_CHECKING:
    from sessionledger.domain.compaction import CompactionResult
    from sessionledger.domain.compaction.ports import Strategy, Trigger

T = TypeVar("T")


def _require_id(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return check_id(value, name)


def _require_new_id(value: Any, name: str) -> str:
    """`_require_id` for an id the ledger will store (a new session's): its length is bounded too."""
    return check_new_id(_require_id(value, name), name)


def _not_owned(session: Session, user_id: str | None, app_name: str | None = None) -> str | None:
    """The one ownership rule: why a request on behalf of `user_id` / `app_name` (`None`: any)
    may not touch the session, or `None` when it may."""
    if user_id is not None and session.user_id != user_id:
        return f"session {session.id!r} does not belong to user {user_id!r}"
    if app_name is not None and session.app_name != app_name:
        return f"session {session.id!r} does not belong to app {app_name!r}"
    return None


def _entry_types(types: str | Sequence[str], prefix: object, after: object) -> list[str]:
    """The checked `types` (one or several non-empty strings) of an entry read, its `prefix` and
    `after` (a ledger position) checked too."""
    wanted = [types] if isinstance(types, str) else list(types)
    if not wanted or not all(isinstance(t, str) and t for t in wanted):
        raise ValueError(f"types must be one non-empty string or several, not {types!r}")
    if not isinstance(prefix, str):
        raise ValueError(f"prefix must be a string, not {prefix!r}")
    if type(after) is not int or after < 0:
        raise ValueError(f"after must be a non-negative integer, not {after!r}")
    return wanted


def _now() -> datetime:
    return datetime.now(UTC)


def append_message_result(draft: Draft, outcome: AppendOutcome) -> SessionEvent:
    """`append_message`'s answer: the event as stored (also when it was stored before)."""
    event = appended_event(draft)
    if outcome is AppendOutcome.NO_SESSION:
        raise SessionNotFound(f"session {event.session_id!r} not found")
    return event


def append_event_result(event: SessionEvent, expected_version: int | None, outcome: AppendOutcome) -> bool:
    """`append_event`'s answer for the outcome of the event's append (`True`: stored)."""
    if outcome is AppendOutcome.NO_SESSION:
        raise SessionNotFound(f"session {event.session_id!r} not found")
    if outcome is AppendOutcome.CONFLICT:
        raise ConcurrencyConflict(
            f"session {event.session_id!r} is not at event_version {expected_version}: nothing appended"
        )
    return outcome is AppendOutcome.STORED


def append_draft(event: SessionEvent, max_payload_bytes: int) -> Draft:
    """What appending `event` stores, or `ValueError` saying why the ledger refuses it.

    The one check of an appended event, for the service's appends and for `EventPublisher.publish`
    (an event the publisher takes is one the ledger takes): plain JSON, text that UTF-8 can encode,
    at most `max_payload_bytes`; `temp:` state keys are dropped and the archived flag cleared.
    """
    if not isinstance(event, SessionEvent):
        raise ValueError("event must be a SessionEvent")
    if holds_temp(event.state_delta):
        event = replace(event, state_delta=strip_temp(event.state_delta))
    if event.archived:
        event = event.with_archived(False)
    try:
        draft = event_draft(event)
        event.id.encode(), event.session_id.encode()  # hashed into the event's ledger row
    except UnicodeEncodeError as error:
        raise unencodable(f"event {event.id!r}", error) from None
    return within_limit(draft, f"event {event.id!r}", max_payload_bytes)


def unencodable(what: str, error: UnicodeEncodeError) -> ValueError:
    """The refusal of a record in which `what` holds text UTF-8 cannot encode (a lone surrogate):
    the ledger hashes a record's UTF-8 bytes, and the database stores them."""
    held = error.object[error.start : error.end]
    return ValueError(f"{what} holds {held!r}, which UTF-8 cannot encode ({error.reason})")


def within_limit(draft: Draft, what: str, max_payload_bytes: int) -> Draft:
    """The draft, or a `ValueError` when its payload is over `max_payload_bytes`."""
    if draft.size > max_payload_bytes:
        raise ValueError(
            f"{what} is {draft.size} bytes as JSON, over the payload limit of {max_payload_bytes} bytes "
            "(max_payload_bytes)"
        )
    return draft


class AppendWatcher(Protocol):
    """Hears of appends as they are stored, and is closed with the service (`watch_appends`)."""

    def appended(self, session_id: str) -> None: ...

    def close(self) -> None: ...


class AppendSteps:
    """A one-event append in its two steps, the ones `SessionService.append_event` and
    `append_message` are made of: the checked draft (no I/O) and its storing; and the checked
    drafts of an adapter's append (`append_entries`).

    For a caller that runs the steps apart: the async service drafts on the event loop and sends
    the draft from there when it can, and has it stored on its threads when it cannot
    (`async_service.py`); every check stays here, so neither path has a copy of it.
    """

    def __init__(
        self, ledger: Ledger, max_payload_bytes: int, require_owner: Callable[[str, str | None], None]
    ) -> None:
        """`require_owner(session_id, user_id)`: the service's check that a write on behalf of
        `user_id` (`None`: anyone) may touch the session."""
        self._ledger = ledger
        self._max_payload_bytes = max_payload_bytes
        self._require_owner = require_owner
        self.appended: Callable[[str], None] | None = None
        """Told the session id of each append stored (`SessionService.watch_appends`); `None`: no one."""

    def draft_event(self, event: SessionEvent, expected_version: int | None = None) -> Draft:
        """What `append_event(event, expected_version=...)` stores (`append_draft`'s checks:
        `ValueError` saying why not); with `expected_version`, only while the session is at it."""
        draft = append_draft(event, self._max_payload_bytes)
        if expected_version is None:
            return draft
        if type(expected_version) is not int or expected_version < 0:
            raise ValueError(
                f"expected_version must be an event_version (an int >= 0) or None, not {expected_version!r}"
            )
        return draft.expecting(expected_version)

    def draft_message(
        self,
        session_id: str,
        message: Message,
        branch: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        state_delta: Mapping[str, Any] | None = None,
    ) -> Draft:
        """What `append_message` stores: a new event (a fresh id and timestamp) holding `message`."""
        if not isinstance(message, Message):
            raise ValueError("message must be a Message")
        session_id = _require_id(session_id, "session_id")
        event = SessionEvent._new(session_id, message, branch, metadata, state_delta)
        return append_draft(event, self._max_payload_bytes)

    def draft_entries(
        self, session_id: str, entries: Iterable[Entry | Forget], events: Iterable[SessionEvent] = ()
    ) -> tuple[list[Draft], int]:
        """What `SessionService.append_entries(session_id, entries, events=events)` stores, the
        events' drafts first, and how many of them are events (its checks: `ValueError` saying
        why not; no I/O)."""
        session_id = _require_id(session_id, "session_id")
        drafts = []
        for event in events:
            if not isinstance(event, SessionEvent) or event.session_id != session_id:
                raise ValueError(f"events must be SessionEvents of session {session_id!r}")
            drafts.append(append_draft(event, self._max_payload_bytes))
        held = len(drafts)
        now = _now()
        for item in entries:
            if isinstance(item, Entry):
                if not item.plain:  # a plain value's adapter built it of plain JSON (`Entry.plain`)
                    ensure_json(item.value, f"the value of entry {item.key!r}")
                try:
                    draft = entry_draft(session_id, item, now)
                except UnicodeEncodeError as error:
                    raise unencodable(f"entry {item.key!r}", error) from None
            elif isinstance(item, Forget):
                try:
                    draft = forgotten_draft(session_id, item, now)
                except UnicodeEncodeError as error:
                    raise unencodable("a forget", error) from None
            else:
                raise ValueError(f"entries must be Entry or Forget values, not {type(item).__name__}")
            drafts.append(within_limit(draft, f"an entry of {session_id!r}", self._max_payload_bytes))
        return drafts, held

    def store_entries(self, session_id: str, drafts: Sequence[Draft], held: int) -> list[AppendOutcome]:
        """Append `draft_entries`' drafts (`held` of them events) in one transaction: the events'
        outcomes; `SessionNotFound` (nothing stored) when the session is unknown or deleted."""
        if not drafts:
            return []
        outcomes = self._ledger.append(drafts)
        if AppendOutcome.NO_SESSION in outcomes:
            raise SessionNotFound(f"session {session_id!r} not found")
        answers = outcomes[:held]
        self.announce(session_id, *answers)
        return answers

    def store(self, draft: Draft, user_id: str | None = None) -> AppendOutcome:
        """Append the draft, on behalf of `user_id` if given (`ValueError` unless the session is
        theirs); the outcome as the ledger answers it (`append_event_result` and
        `append_message_result` turn it into each method's answer)."""
        return traced(APPEND, lambda span: self._store(draft, user_id, span))

    def _store(self, draft: Draft, user_id: str | None, span: Span) -> AppendOutcome:
        session_id = appended_event(draft).session_id
        self._require_owner(session_id, user_id)
        outcome = self._ledger.append([draft])[0]
        if span.is_recording():
            span.set_attributes(
                {"sessionledger.session_id": session_id, "sessionledger.outcome": outcome.name.lower()}
                | ({"sessionledger.user_id": user_id} if user_id is not None else {})
            )
        self.announce(session_id, outcome)
        return outcome

    def announce(self, session_id: str, *outcomes: AppendOutcome) -> None:
        """Tell the watcher (`appended`) of an append to the session that stored an event (a
        one-event append's outcome, or an adapter's events': entries alone leave the window as
        it is)."""
        if self.appended is not None and AppendOutcome.STORED in outcomes:
            self.appended(session_id)


class SessionService:
    """Sessions, their events, state and compaction; synchronous and safe to share between threads."""

    def __init__(self, ledger: Ledger, settings: Settings, token_counter: TokenCounter) -> None:
        """Built by `open_service` (the composition root) from one `Settings`; `token_counter` is
        the one every request of this service carries (the settings' model)."""
        self._ledger = ledger
        self._settings = settings
        self._token_counter = token_counter
        self._steps = AppendSteps(ledger, settings.max_payload_bytes, self._require_owner)
        self._watcher: AppendWatcher | None = None

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    @property
    def append_steps(self) -> AppendSteps:
        """`append_event` and `append_message` taken apart (drafting, storing): the async service's."""
        return self._steps

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def token_counter(self) -> TokenCounter:
        """What `estimator=None` counts with in this service's compactions, and what it stores."""
        return self._token_counter

    @property
    def broker_url(self) -> str | None:
        """The workers' queue, as configured: the service publishes nothing itself (the relay tails
        the ledger), so workers on the same database compact its sessions whatever this is."""
        return self._settings.broker_url

    def watch_appends(self, watcher: AppendWatcher) -> None:
        """Tell `watcher` of every append stored from now on, once it is committed (the in-process
        compactor: `background_compaction.py`), and close it before the ledger when the service
        closes. Without a watcher an append announces nothing: workers hear of appends from the
        relay, which tails the ledger."""
        self._watcher = watcher
        self._steps.appended = watcher.appended

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
        self._ledger.close()

    def __enter__(self) -> SessionService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- sessions (docs/api.md "Sessions") ----------------------------------------------------

    def create_session(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        app_name: str = "default",
        ttl: timedelta | DefaultTtl | None = DEFAULT_TTL,
        metadata: Mapping[str, Any] | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new session; `ttl=None` never expires, and `ttl` left out takes the operator's
        `session_ttl` setting, itself never unless set: nothing expires that nobody asked to.

        Session ids are unique across every user and app: an id in use, or once used, is a
        `SessionExists` (a `ValueError`) whose text is the same whoever owns it and whatever became
        of it, so it tells another user nothing about that session.
        """
        _require_new_id(user_id, "user_id")
        _require_new_id(app_name, "app_name")
        session_id = str(uuid4()) if session_id is None else _require_new_id(session_id, "session_id")
        metadata = freeze(metadata, "metadata")
        state = freeze(state, "state")
        ensure_json(metadata, "metadata")
        ensure_json(state, "state")
        created_at = _now()
        session = Session(
            id=session_id,
            user_id=user_id,
            app_name=app_name,
            created_at=created_at,
            expires_at=expiry(created_at, self._settings.session_ttl if ttl is DEFAULT_TTL else ttl),
            metadata=metadata,
        )
        state = strip_temp(state)
        within_limit(
            created_draft(session, state), f"session {session_id!r}", self._settings.max_payload_bytes
        )
        try:
            self._ledger.create_session(session, state)
        except SessionExists:
            raise SessionExists(
                f"cannot create session {session_id!r}: session ids are unique across users and apps "
                "and this one cannot be used; leave session_id out for a new one"
            ) from None
        created = self._ledger.get_session(session_id)
        if created is None:  # deleted in the instant since it was created
            raise SessionNotFound(f"session {session_id!r} not found")
        return created

    def get_session(self, session_id: str, *, user_id: str | None = None) -> Session | None:
        """The session, or `None`; with `user_id`, another user's session is `None` too."""
        session = self._ledger.get_session(_require_id(session_id, "session_id"))
        if session is None or _not_owned(session, user_id) is not None:
            return None
        return session

    def _require_owner(self, session_id: str, user_id: str | None) -> None:
        """For writes on behalf of a user: `ValueError` unless that user owns the session."""
        if user_id is None:
            return
        session = self._ledger.get_session(session_id)
        if session is None:
            raise SessionNotFound(f"session {session_id!r} not found")
        problem = _not_owned(session, _require_id(user_id, "user_id"))
        if problem is not None:
            raise ValueError(problem)

    def _visible(self, session_id: str, user_id: str | None) -> bool:
        """For reads on behalf of a user: another user's session looks like an unknown one."""
        return user_id is None or self.get_session(session_id, user_id=user_id) is not None

    def list_sessions(self, user_id: str, *, app_name: str | None = None) -> list[Session]:
        """The user's sessions, oldest first; `app_name=None` means every app."""
        if app_name is not None:
            _require_id(app_name, "app_name")
        return self._ledger.list_sessions(_require_id(user_id, "user_id"), app_name)

    def recent_sessions(
        self, *, app_name: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[Session]:
        """Every user's sessions, newest first: at most `limit` after skipping `offset` (an operator's
        listing; a user's own is `list_sessions`). `app_name=None` means every app."""
        if app_name is not None:
            _require_id(app_name, "app_name")
        if type(limit) is not int or not 0 < limit <= MAX_INT64:
            raise ValueError(f"limit must be a positive integer up to 2**63 - 1, not {limit!r}")
        if type(offset) is not int or not 0 <= offset <= MAX_INT64:
            raise ValueError(f"offset must be a non-negative integer up to 2**63 - 1, not {offset!r}")
        return self._ledger.recent_sessions(app_name, limit, offset)

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        """Erase the session's messages and record the deletion; a missing session is a no-op.

        With `user_id`, only that user's session is deleted (`ValueError` for another user's).
        """
        _require_id(session_id, "session_id")
        if user_id is not None and self._ledger.get_session(session_id) is not None:
            self._require_owner(session_id, user_id)
        self._ledger.delete_session(session_id, "deleted")

    def delete_expired_sessions(self, now: datetime | None = None) -> int:
        """Delete the sessions with `expires_at < now`; returns how many were deleted."""
        now = _now() if now is None else now
        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError("now must be timezone-aware")
        in_utc(now, "now")
        return sum(
            self._ledger.delete_session(sid, "expired") for sid in self._ledger.expired_session_ids(now)
        )

    # --- events (docs/api.md "Events") --------------------------------------------------------

    def append_event(
        self, event: SessionEvent, *, user_id: str | None = None, expected_version: int | None = None
    ) -> bool:
        """Store the event; `False` (nothing changes) when its id is already in the session's ledger.

        With `user_id`, the session must belong to that user (`ValueError` otherwise). With
        `expected_version`, only while the session is at that `event_version`, checked in the
        append's own write: `ConcurrencyConflict` (nothing stored) otherwise; `ValueError` for an
        `expected_version` that is not an int >= 0.
        """
        steps = self._steps
        draft = steps.draft_event(event, expected_version)
        return append_event_result(event, expected_version, steps.store(draft, user_id))

    def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        branch: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        state_delta: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> SessionEvent:
        """Append `message` as a new event; returns the event as stored (no `temp:` keys).

        With `user_id`, the session must belong to that user (`ValueError` otherwise).
        """
        steps = self._steps
        draft = steps.draft_message(session_id, message, branch, metadata, state_delta)
        return append_message_result(draft, steps.store(draft, user_id))

    def ingest(
        self,
        events: Iterable[SessionEvent | Draft],
        *,
        user_id: str | None = None,
        app_name: str | None = None,
        tally: Tally | None = None,
    ) -> list[AppendOutcome]:
        """Append a batch (any sessions) in one transaction: the workers' ingest path.

        Idempotent per event id; per-session order is the batch order. Every event is validated
        first (`ValueError` and nothing stored when one is invalid); an unknown session is the
        `NO_SESSION` outcome for its events, not an exception, so one bad event cannot block a batch.
        With `user_id` and/or `app_name` (the identity a publisher was bound to), the events of a
        session that is not that user's (or app's) are the `REFUSED` outcome, and stored nowhere.
        The outcomes are added to `tally`'s counters in the batch's transaction. An event may come
        as the `Draft` `append_draft` makes of it (an ingest worker drafts each line as it decodes
        it: `wire.decode_draft`); only its size is checked again.
        """
        drafts = [self._ingest_draft(event) for event in events]
        if user_id is None and app_name is None:
            return self._append(drafts, tally)
        for value, name in ((user_id, "user_id"), (app_name, "app_name")):
            if value is not None:
                _require_id(value, name)
        session_ids = [appended_event(draft).session_id for draft in drafts]
        refusals = {sid: self._refusal(sid, user_id, app_name) for sid in set(session_ids)}
        kept = [draft for sid, draft in zip(session_ids, drafts, strict=True) if refusals[sid] is None]
        stored = iter(self._append(kept, tally))
        return [next(stored) if (r := refusals[sid]) is None else r for sid in session_ids]

    def _refusal(self, session_id: str, user_id: str | None, app_name: str | None) -> AppendOutcome | None:
        """Why an identity's events are not appended to the session, else `None`: a session
        unknown at this check stays unknown to them even if it is created before the append."""
        session = self._ledger.get_session(session_id)
        if session is None:
            return AppendOutcome.NO_SESSION
        return None if _not_owned(session, user_id, app_name) is None else AppendOutcome.REFUSED

    def _draft(self, event: SessionEvent) -> Draft:
        return append_draft(event, self._settings.max_payload_bytes)

    def _ingest_draft(self, event: SessionEvent | Draft) -> Draft:
        if isinstance(event, Draft):
            return within_limit(
                event, f"event {appended_event(event).id!r}", self._settings.max_payload_bytes
            )
        return self._draft(event)

    def _append(self, drafts: Sequence[Draft], tally: Tally | None = None) -> list[AppendOutcome]:
        """The batch appended; its sessions announced to the watcher, if any (`watch_appends`)."""
        return traced(APPEND, lambda span: self._append_traced(drafts, tally, span))

    def _append_traced(self, drafts: Sequence[Draft], tally: Tally | None, span: Span) -> list[AppendOutcome]:
        outcomes = self._ledger.append(drafts, tally)
        if span.is_recording():
            span.set_attributes(
                {
                    "sessionledger.event_count": len(drafts),
                    "sessionledger.stored_count": outcomes.count(AppendOutcome.STORED),
                    "sessionledger.session_count": len({appended_event(d).session_id for d in drafts}),
                }
            )
        appended = self._steps.appended
        if appended is not None:
            stored = zip(drafts, outcomes, strict=True)
            for session_id in dict.fromkeys(
                appended_event(d).session_id for d, o in stored if o is AppendOutcome.STORED
            ):
                appended(session_id)
        return outcomes

    # --- adapters' entries (docs/api.md "Adapter entries") --------------------------------------

    def append_entries(
        self,
        session_id: str,
        entries: Iterable[Entry | Forget],
        *,
        events: Iterable[SessionEvent] = (),
        user_id: str | None = None,
    ) -> list[AppendOutcome]:
        """Append a framework adapter's `events` (the session's messages, each stored once by id),
        then its `entries` (`Entry` and `Forget` records, `domain.entries`), in order, in one
        transaction, on the session's hash chain: verify, replay, export and timelines cover them.

        Entries are outside the message window and leave the event version as it is. Returns the
        events' outcomes (`STORED`, or `DUPLICATE` for an id the session's ledger holds). Every
        item is checked first (`ValueError`, nothing stored); `SessionNotFound` (nothing stored)
        when the session is unknown or deleted; with `user_id`, `ValueError` for another user's.
        """
        drafts, held = self._steps.draft_entries(session_id, entries, events)
        self._require_owner(session_id, user_id)
        return self._steps.store_entries(session_id, drafts, held)

    def entries(
        self,
        session_id: str,
        types: str | Sequence[str],
        *,
        prefix: str = "",
        after: int = 0,
        limit: int | None = None,
        user_id: str | None = None,
    ) -> list[StoredEntry]:
        """The session's live entries of `types` (one type or several) whose key starts with
        `prefix`, newest first, at most `limit`: those no later `Forget` matched. With `after` (a
        `StoredEntry.position`), only those written after that position: a read whose cost
        follows what was written since. `[]` for an unknown or deleted session, and, with
        `user_id`, for another user's."""
        session_id = _require_id(session_id, "session_id")
        wanted = _entry_types(types, prefix, after)
        if limit is not None and (type(limit) is not int or limit <= 0):
            raise ValueError(f"limit must be a positive integer or None, not {limit!r}")
        if not self._visible(session_id, user_id):
            return []
        return self._ledger.entries(session_id, wanted, prefix, after, limit)

    def entry_log(
        self,
        session_id: str,
        types: str | Sequence[str],
        *,
        prefix: str = "",
        after: int = 0,
        user_id: str | None = None,
    ) -> list[EntryRow]:
        """The session's entry records of `types` under `prefix`, its forget records and its
        erasure (as a `Forget()` of everything) after ledger position `after`, oldest first.

        For a reader that keeps a session's live entries in memory: it applies these in order
        (an entry is its key's newest value, a forget removes what it matches) and asks again
        after the last position it saw, reading only what was written since, by anyone. `[]` for
        an unknown session, and, with `user_id`, for another user's or a deleted one."""
        session_id = _require_id(session_id, "session_id")
        wanted = _entry_types(types, prefix, after)
        if user_id is not None and not self._visible(session_id, user_id):
            return []
        return self._ledger.entry_log(session_id, wanted, prefix, after)

    def get_events(
        self, session_id: str, filter: EventFilter | None = None, *, user_id: str | None = None
    ) -> list[SessionEvent]:
        """The log, filtered: archived events first, then the active window.

        `[]` for an unknown session, and, with `user_id`, for another user's session.
        """
        if filter is None:
            filter = EventFilter.all()
        elif not isinstance(filter, EventFilter):
            raise ValueError("filter must be an EventFilter or None")
        if not self._visible(_require_id(session_id, "session_id"), user_id):
            return []
        return self._ledger.events(session_id, filter)

    def get_messages(self, session_id: str, *, user_id: str | None = None) -> list[Message]:
        """The active window's messages, in order; `[]` for an unknown (or another user's) session."""
        if not self._visible(_require_id(session_id, "session_id"), user_id):
            return []
        return self._ledger.messages(session_id)

    def window_payloads(
        self, session_id: str, build: Callable[[Mapping[str, Any]], T], *, user_id: str | None = None
    ) -> list[T]:
        """`build(payload)` of each event payload of the active window, in order: for a reader that
        rebuilds its own items from the stored JSON without building events (the openai-agents
        session's); `[]` for an unknown (or another user's) session."""
        if not self._visible(_require_id(session_id, "session_id"), user_id):
            return []
        return self._ledger.payloads(session_id, build)

    def event_version(self, session_id: str, *, user_id: str | None = None) -> int:
        """+1 per effective append, applied compaction and rewind; 0 for an unknown (or, with
        `user_id`, another user's) session."""
        if not self._visible(_require_id(session_id, "session_id"), user_id):
            return 0
        return self._ledger.version(session_id)

    # --- state (docs/api.md "State scopes") ---------------------------------------------------

    def get_app_state(self, app_name: str) -> Mapping[str, Any]:
        return self._ledger.app_state(_require_id(app_name, "app_name"))

    def get_user_state(self, user_id: str, *, app_name: str = "default") -> Mapping[str, Any]:
        return self._ledger.user_state(_require_id(app_name, "app_name"), _require_id(user_id, "user_id"))

    # --- compaction (docs/api.md "Compacting a session") --------------------------------------

    def window_stats(self, session_id: str, *, user_id: str | None = None) -> WindowStats | None:
        """The active window's running stats (O(1)); `None` for an unknown (or, with `user_id`,
        another user's) session."""
        if not self._visible(_require_id(session_id, "session_id"), user_id):
            return None
        return self._ledger.window_stats(session_id)

    def fill_token_counts(
        self, session_id: str, counter: TokenCounter | None = None, *, user_id: str | None = None
    ) -> int:
        """Count the window events whose token count is unknown (the service's counter unless
        another is given); returns how many: 0 for an unknown (or another user's) session."""
        if not self._visible(_require_id(session_id, "session_id"), user_id):
            return 0
        return self._ledger.fill_token_counts(session_id, counter or self._token_counter)

    def compact(
        self,
        session_id: str,
        trigger: Trigger,
        strategy: Strategy,
        *,
        user_id: str | None = None,
        tally: Tally | None = None,
    ) -> CompactionResult:
        """Evaluate `trigger` on the active window and, when it fires, apply `strategy`'s result.

        The write is checked against the window epoch read: events appended meanwhile simply
        follow the new window; a concurrent compaction makes this one re-read and re-evaluate,
        up to `settings.compaction_attempts` times, then `ConcurrencyConflict`. With `user_id`,
        the session must belong to that user (`ValueError` otherwise). A written compaction is
        added to `tally`'s counters in its transaction.
        """
        _require_id(session_id, "session_id")
        if trigger is None or strategy is None:
            raise ValueError("trigger and strategy must not be None")
        self._require_owner(session_id, user_id)
        return traced(COMPACT, lambda span: self._compact(session_id, trigger, strategy, tally, span))

    def _compact(
        self, session_id: str, trigger: Trigger, strategy: Strategy, tally: Tally | None, span: Span
    ) -> CompactionResult:
        """`compact`'s loop, in its span (`sessionledger.compact`), which says what it did."""
        from sessionledger.domain.compaction import CompactionRequest, CompactionResult  # not for readers

        recording = span.is_recording()
        if recording:
            span.set_attribute("sessionledger.session_id", session_id)
        for attempt in range(1, self._settings.compaction_attempts + 1):
            session = self._ledger.get_session(session_id)
            read = self._ledger.window(session_id)
            if session is None or read is None:
                raise SessionNotFound(f"session {session_id!r} not found")
            if read.stats.uncounted:  # count once per event, store, and read the counts back
                self._ledger.fill_token_counts(session_id, self._token_counter)
                read = self._ledger.window(session_id)
                if read is None:
                    raise SessionNotFound(f"session {session_id!r} not found")
            counted = zip(read.events, read.token_counts, strict=False)
            known = {event.id: tokens for event, tokens in counted if tokens is not None}
            request = CompactionRequest.of(session, read.events, read.stats, known, self._token_counter)
            if recording:
                span.set_attributes(
                    {
                        "sessionledger.user_id": session.user_id,
                        "sessionledger.app_name": session.app_name,
                        "sessionledger.window_events": len(read.events),
                        "sessionledger.attempts": attempt,
                    }
                )
            if not trigger.should_compact(request):
                return CompactionResult.noop(read.events)
            result = strategy.compact(request)
            if not result.archived:
                return result
            if (
                self._ledger.apply_compaction(read, result, _source(result, read.events, strategy), tally)
                is not None
            ):
                if recording:
                    span.set_attributes(
                        {
                            "sessionledger.archived_count": result.events_removed,
                            "sessionledger.compacted_count": len(result.compacted),
                            "sessionledger.tokens_saved": result.tokens_saved,
                        }
                    )
                return result
        raise ConcurrencyConflict(
            f"compaction of session {session_id!r} lost {self._settings.compaction_attempts} races "
            "to concurrent compactions"
        )

    # --- rewind (google-adk's, docs/api.md "Rewind") ------------------------------------------

    def rewind(self, session_id: str, before_invocation_id: str, *, user_id: str | None = None) -> int:
        """Undo the active window from the first event of that invocation on; the new event_version.

        The rewind is itself a ledger record: the window and session-scoped state then behave as
        if the rewound events never happened (`app:`/`user:` state is never rewound), while the
        ledger keeps them for audit. `SessionNotFound` for an unknown session, `LookupError` when
        no event of the active window has that invocation id; with `user_id`, `ValueError` for
        another user's session.
        """
        _require_id(session_id, "session_id")
        _require_id(before_invocation_id, "before_invocation_id")
        self._require_owner(session_id, user_id)
        return self._ledger.apply_rewind(session_id, before_invocation_id)

    # --- audit --------------------------------------------------------------------------------

    def records(self, session_id: str, *, user_id: str | None = None) -> list[LedgerRecord]:
        """Every ledger record of the session, by position (erased payloads are `None`).

        With `user_id`, `[]` unless that user owns the session; a deleted session has no owner
        to read it for, so only a read on behalf of no one in particular (the operator's) sees it.
        """
        if not self._visible(_require_id(session_id, "session_id"), user_id):
            return []
        return list(self._ledger.records(session_id))

    def replay(
        self,
        session_id: str,
        *,
        upto_version: int | None = None,
        at: datetime | None = None,
        user_id: str | None = None,
    ) -> Projection:
        """The session rebuilt from its ledger records alone, as it stood at a version or a time
        (with `user_id`, another user's session replays as an unknown one: empty)."""
        return replay(self.records(session_id, user_id=user_id), upto_version=upto_version, at=at)


def _source(result: CompactionResult, read: Sequence[SessionEvent], strategy: Strategy) -> str:
    """The `compactionSource` of the synthetic events the result adds, else the strategy's name."""
    known = {event.id for event in read}
    for event in result.compacted:
        if event.id not in known and SessionEvent.COMPACTION_SOURCE in event.metadata:
            return str(event.metadata[SessionEvent.COMPACTION_SOURCE])
    return type(strategy).__name__
