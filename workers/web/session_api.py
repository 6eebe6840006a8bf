"""The HTTP session API (`/api/v1/`, docs/http-api.md): sessions, events and state over HTTP,
for agents outside Python (the `sessionledger-adk` npm package is ADK-TS's session service on it).

A separate ASGI application mounted on the audit page's, so it shares its server and its tokens
but has its own OpenAPI document and answers only JSON. The user is always the bearer token's: a
session is addressed as ADK addresses one, `(app, user, session_id)`, and its ledger id spells the
three (`infrastructure.adk.ids`), so one user's id never names another user's session. Writes need
a token made with `--write`. Events are the ledger's own JSON (`domain.codec.event_document`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import uuid4

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sessionledger.domain.access import Grant
from sessionledger.domain.codec import event_document, format_timestamp, validated_event
from sessionledger.domain.errors import ConcurrencyConflict, SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.ports import AccessTokens
from sessionledger.domain.sessions import Session
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.adk.ids import adk_key, ledger_session_id
from sessionledger.infrastructure.agents.recall import NO_RESULTS, RecallTools
from sessionledger.infrastructure.loop_appends import LoopAppends, NotRead
from sessionledger.infrastructure.thread_pool import ThreadPool
from sessionledger.workers.bearer import bearer_token, grant_for, granted, token_parts
from sessionledger.workers.web.bounded_body import json_body
from sessionledger.workers.web.owned_sessions import OwnedSessions

from sessionledger import __version__

__all__ = ["ENVELOPE_BYTES", "session_api"]

ENVELOPE_BYTES = 16 * 1024
"""What a request body may hold beyond the ledger's payload limit: the event's id and envelope."""

_LAST_APPENDED = EventFilter(exclude_synthetic=True, last_n=1)
"""The event appended last: a session's last update time (a compaction's summary is no update)."""

_EVENT_FIELDS = frozenset(
    {
        "id",
        "session_id",
        "archived",
        "message",
        "metadata",
        "branch",
        "invocation_id",
        "state_delta",
        "timestamp",
    }
)
_MESSAGE_FIELDS = frozenset({"type", "text", "tool_calls", "tool_responses", "metadata"})


class NewSession(BaseModel):
    """`POST /apps/{app}/sessions`: the session's id (a new uuid4 when left out) and its state
    (`app:` and `user:` keys go to the app's and the user's state, `temp:` keys are dropped)."""

    model_config = ConfigDict(extra="forbid")
    session_id: str | None = Field(default=None, min_length=1, max_length=200)
    state: dict[str, Any] | None = None


class NewEvent(BaseModel):
    """`POST /apps/{app}/sessions/{session_id}/events`: an event as `sessionledger events --json`
    prints one (every field but `message` optional), appended only while the session is at
    `expected_version` when that is given."""

    model_config = ConfigDict(extra="forbid")
    event: dict[str, Any]
    expected_version: int | None = Field(default=None, ge=0)


def session_api(
    service: SessionService, tokens: AccessTokens, loop_appends: LoopAppends | None = None
) -> FastAPI:
    """The API over one ledger; mount it at `/api/v1`. With `loop_appends` (the same ledger's and
    tokens'), the common append is made on the event loop, without a hop to a thread."""
    api = FastAPI(
        title="sessionledger session API",
        version=__version__,
        description="Sessions, events and state of the ledger over HTTP (`Authorization: Bearer TOKEN`).",
        openapi_url="/openapi.json",
        servers=[{"url": "/api/v1"}],  # where audit_app mounts it
        docs_url=None,
        redoc_url=None,
    )
    api.state.tokens = tokens
    api.state.service = service
    api.state.recall = RecallTools(service)
    # the writes' hop to a thread: the service's own pool (`thread_pool.py`) rather than anyio's,
    # which cost 0.4-0.6 ms more per append on a loaded machine (its worker took the GIL from the
    # loop at the hand-off); one thread per pooled connection, daemons, stopped when the app is dropped
    api.state.writes = ThreadPool(service.settings.pool_size, "sessionledger-api")
    api.state.body_limit = service.settings.max_payload_bytes + ENVELOPE_BYTES
    api.state.loop_appends = loop_appends
    for error, status in _ERRORS.items():
        api.add_exception_handler(error, _answer_with(status))
    api.add_exception_handler(HTTPException, _http_error)
    api.add_exception_handler(RequestValidationError, _invalid_request)
    _session_routes(api)
    _event_routes(api)
    _state_routes(api)
    return api


# --- who asks, and errors --------------------------------------------------------------------------


def bearer_grant(request: Request) -> Grant:
    """The grant of the request's bearer token (never a cookie: a page of another site could send
    one along with a write)."""
    return _granted(request.app.state.tokens, request.headers.get("authorization", ""), write=False)


async def writer_grant(grant: Annotated[Grant, Depends(bearer_grant)]) -> Grant:
    """A writing token's grant (async: a check with no I/O needs no hop to a thread)."""
    return _writing(grant)


def _granted(tokens: AccessTokens, authorization: str, *, write: bool) -> Grant:
    """The grant of an `Authorization` header's token: 401 without a known one, 403 for a
    read-only one when `write`."""
    token = bearer_token(authorization)
    return _checked(grant_for(tokens, token) if token else None, write=write)


def _checked(grant: Grant | None, *, write: bool) -> Grant:
    """401 without a grant, 403 for a read-only one when `write`."""
    if grant is None:
        raise HTTPException(401, "a bearer token is needed (sessionledger token create --user USER --write)")
    return _writing(grant) if write else grant


def _writing(grant: Grant) -> Grant:
    if not grant.write:
        raise HTTPException(
            403, "this token is read-only: writing needs one made with `token create --write`"
        )
    return grant


Reader = Annotated[Grant, Depends(bearer_grant)]
Writer = Annotated[Grant, Depends(writer_grant)]


def _answer_with(status: int) -> Callable[[Request, Exception], Response]:
    def answer(_: Request, error: Exception) -> Response:
        return JSONResponse({"error": str(error)}, status)

    return answer


_ERRORS: dict[type[Exception], int] = {ValueError: 400, SessionNotFound: 404, ConcurrencyConflict: 409}


def _http_error(_: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    headers = {"WWW-Authenticate": "Bearer"} if error.status_code == 401 else None
    return JSONResponse({"error": error.detail}, error.status_code, headers=headers)


def _invalid_request(_: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    return JSONResponse({"error": _first_problem(error.errors())}, 400)


def _parsed(model: type[BaseModel], body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise HTTPException(400, _first_problem(error.errors())) from None


def _first_problem(errors: Sequence[Any]) -> str:
    """One message for the first thing wrong in a request, FastAPI's or a body read here: where it
    is (`body` for the body as a whole), and what."""
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    return f"{where}: {first.get('msg', 'invalid')}"


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The request body of a route that reads its body itself (bounded), for the OpenAPI document."""
    schema = {"content": {"application/json": {"schema": model.model_json_schema()}}, "required": True}
    return {"requestBody": schema}


# --- sessions --------------------------------------------------------------------------------------


def _ledger_id(app: str, grant: Grant, session_id: str) -> str:
    return ledger_session_id(app, grant.user_id, session_id)


def _owned(service: SessionService, app: str, grant: Grant, session_id: str) -> Session:
    """The grant's user's session of that app; 404 for any other (missing, or another's)."""
    session = service.get_session(_ledger_id(app, grant, session_id), user_id=grant.user_id)
    if session is None or session.app_name != app:
        raise SessionNotFound(f"no session {session_id!r} in app {app!r}")
    return session


def _last_update(service: SessionService, session: Session) -> float:
    """Seconds since the epoch of the last event appended, else of the session's creation."""
    last = service.get_events(session.id, _LAST_APPENDED)
    return (last[0].timestamp if last else session.created_at).timestamp()


def _session_document(
    service: SessionService, session: Session, session_id: str, *, events: list[SessionEvent] | None
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "id": session_id,
        "app_name": session.app_name,
        "user_id": session.user_id,
        "ledger_id": session.id,
        "created_at": format_timestamp(session.created_at),
        "last_update_time": _last_update(service, session),
        "state": dict(session.state),
    }
    if events is not None:
        document["events"] = [event_document(event) for event in events]
    return document


def _moment(text: str) -> datetime:
    """`after`: seconds since the epoch (ADK's event time) or an ISO-8601 time with a zone."""
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ValueError(
            f"after must be seconds since the epoch or an ISO-8601 time with a zone, not {text[:40]!r}"
        )
    return moment


def _create(service: SessionService, app: str, grant: Grant, new: NewSession) -> dict[str, Any]:
    session_id = (new.session_id or str(uuid4())).strip()
    ledger_id = _ledger_id(app, grant, session_id)
    try:
        session = service.create_session(grant.user_id, session_id=ledger_id, app_name=app, state=new.state)
    except SessionExists:
        raise HTTPException(
            409, f"session {session_id!r} exists, or existed (a deleted session's id is not used again)"
        ) from None
    return _session_document(service, session, session_id, events=[])


def _session_routes(api: FastAPI) -> None:
    service: SessionService = api.state.service

    @api.post("/apps/{app}/sessions", status_code=201, openapi_extra=_body_schema(NewSession))
    async def create_session(request: Request, app: str, grant: Writer) -> Response:
        """Create a session of the token's user (409 when the id is taken)."""
        new = _parsed(NewSession, await json_body(request, request.app.state.body_limit))
        document = await request.app.state.writes.run(lambda: _create(service, app, grant, new))
        return JSONResponse({**document, "version": 0}, 201)

    @api.get("/apps/{app}/sessions")
    def list_sessions(app: str, grant: Reader) -> dict[str, Any]:
        """The user's sessions of the app, oldest first, without events."""
        found = []
        for session in service.list_sessions(grant.user_id, app_name=app):
            key = adk_key(session.id)  # the user's other sessions (not ADK-keyed) are not the API's
            if key is not None and key[:2] == (app, grant.user_id):
                found.append(_session_document(service, session, key[2], events=None))
        return {"sessions": found}

    @api.get("/apps/{app}/sessions/{session_id}")
    def get_session(
        app: str,
        session_id: str,
        grant: Reader,
        num_recent_events: Annotated[int | None, Query(ge=0, le=10**9)] = None,
        after: Annotated[str | None, Query(max_length=64)] = None,
    ) -> dict[str, Any]:
        """The session with its active window (the last `num_recent_events`, those from `after` on)
        and `version`, the `expected_version` of the next append."""
        session = _owned(service, app, grant, session_id)
        version = service.event_version(session.id)  # before the events: a later append makes it stale
        events = service.get_events(session.id, EventFilter.active())
        if after is not None:
            since = _moment(after)
            events = [event for event in events if event.timestamp >= since]
        if num_recent_events is not None:
            events = events[max(0, len(events) - num_recent_events) :] if num_recent_events else []
        return {**_session_document(service, session, session_id, events=events), "version": version}

    @api.delete("/apps/{app}/sessions/{session_id}", status_code=204)
    def delete_session(app: str, session_id: str, grant: Writer) -> Response:
        """Delete the session (its record of deletion stays in the ledger); a missing one is a no-op."""
        session = service.get_session(_ledger_id(app, grant, session_id), user_id=grant.user_id)
        if session is not None and session.app_name == app:
            service.delete_session(session.id, user_id=grant.user_id)
        return Response(status_code=204)

    @api.post("/apps/{app}/sessions/{session_id}/end")
    def end_session(app: str, session_id: str, grant: Writer) -> dict[str, Any]:
        """ADK-TS's `endSession`: the whole session for a hand-off (to memory), nothing deleted."""
        session = _owned(service, app, grant, session_id)
        version = service.event_version(session.id)
        events = service.get_events(session.id, EventFilter.active())
        return {**_session_document(service, session, session_id, events=events), "version": version}


# --- events ----------------------------------------------------------------------------------------


def _event_of(document: dict[str, Any], ledger_id: str, session_id: str) -> SessionEvent:
    """The event of a request (`ValueError` saying what is wrong): the ledger's JSON, defaults for
    every field but `message`."""
    unknown = sorted(set(document) - _EVENT_FIELDS)
    if unknown:
        raise ValueError(f"event: unknown field {unknown[0]!r}")
    if document.get("session_id") not in (None, ledger_id, session_id):
        raise ValueError("event.session_id names another session than the path")
    message = document.get("message")
    if not isinstance(message, dict):
        raise ValueError("event.message must be an object with at least a type")
    unknown = sorted(set(message) - _MESSAGE_FIELDS)
    if unknown:
        raise ValueError(f"event.message: unknown field {unknown[0]!r}")
    event_id = document.get("id") or str(uuid4())
    if not isinstance(event_id, str):
        raise ValueError("event.id must be a string")
    payload = {
        "message": {"text": None, "tool_calls": [], "tool_responses": [], "metadata": {}, **message},
        "metadata": document.get("metadata") or {},
        "branch": document.get("branch"),
        "invocation_id": document.get("invocation_id"),
        "state_delta": document.get("state_delta") or {},
        "timestamp": document.get("timestamp") or format_timestamp(datetime.now(UTC)),
    }
    if not isinstance(payload["timestamp"], str):
        raise ValueError("event.timestamp must be an ISO-8601 time with a zone")
    return validated_event(ledger_id, event_id, payload)[0]


def _stored_before(service: SessionService, event: SessionEvent) -> bool:
    """Whether the session's ledger holds an event with this id (read on a conflict only)."""
    return any(e.id == event.id for e in service.get_events(event.session_id, EventFilter.all()))


def _event_routes(api: FastAPI) -> None:
    service: SessionService = api.state.service
    owned = OwnedSessions()

    @api.post(
        "/apps/{app}/sessions/{session_id}/events", status_code=201, openapi_extra=_body_schema(NewEvent)
    )
    async def append_event(request: Request, app: str, session_id: str) -> Response:
        """Append an event: 201 with the event as stored and the session's new `version`; 200 and
        nothing stored when its id is in the session already; 409 (nothing stored) when the session
        is no longer at `expected_version`; 413 for a body over the payload limit."""
        authorization = request.headers.get("authorization", "")
        if not bearer_token(authorization):  # no I/O: refused before the body is read
            _granted(api.state.tokens, authorization, write=True)
        body = await json_body(request, request.app.state.body_limit)
        loop_appends: LoopAppends | None = api.state.loop_appends
        made = None
        if loop_appends is not None:
            made = await _append_on_loop(loop_appends, owned, authorization, app, session_id, body)
        if made is None:
            made = await api.state.writes.run(
                lambda: _append(service, api.state.tokens, owned, authorization, app, session_id, body)
            )
        stored, document, version = made
        return JSONResponse({"event": document, "version": version, "stored": stored}, 201 if stored else 200)


async def _append_on_loop(
    loop_appends: LoopAppends,
    owned: OwnedSessions,
    authorization: str,
    app: str,
    session_id: str,
    body: dict[str, Any],
) -> tuple[bool, dict[str, Any], int] | None:
    """`_append` on the event loop (`infrastructure.loop_appends`), for the common append, a
    conditional one to a session whose owner is known: the token's read and the append, or for a
    token remembered from an earlier append the append alone, which stores nothing if the token was
    revoked since. `None` for the rest (and when the loop cannot make it), which `_append` then
    makes whole on a thread, reading the token again."""
    parts = token_parts(bearer_token(authorization))
    if parts is None:
        return None
    token_id, secret = parts
    remembered = loop_appends.remembered_token(token_id)
    if remembered is None:
        try:
            stored_token = await loop_appends.find_token(token_id)
        except NotRead:
            return None
        grant = _checked(granted(stored_token, secret), write=True)
        made = await _append_checked(loop_appends, owned, grant, None, app, session_id, body)
        if made is not None and stored_token is not None:
            loop_appends.remember(stored_token)
        return made
    remembered_grant = granted(remembered, secret)
    if remembered_grant is None or not remembered_grant.write:
        return None  # refused on a thread, once the token is read again
    try:
        return await _append_checked(loop_appends, owned, remembered_grant, token_id, app, session_id, body)
    except (HTTPException, ValueError):
        return None  # a token perhaps revoked since: refused on a thread, once it is read again


async def _append_checked(
    loop_appends: LoopAppends,
    owned: OwnedSessions,
    grant: Grant,
    live_token: str | None,
    app: str,
    session_id: str,
    body: dict[str, Any],
) -> tuple[bool, dict[str, Any], int] | None:
    """`_append_on_loop` once the token opened it: the event appended there (while `live_token`
    is not revoked, if given), or `None`."""
    new: NewEvent = _parsed(NewEvent, body)
    ledger_id = _ledger_id(app, grant, session_id)
    if new.expected_version is None or not owned.knows(ledger_id):
        return None
    event = _event_of(new.event, ledger_id, session_id)
    if not await loop_appends.append_event(event, new.expected_version, live_token):
        return None
    return True, event_document(event), new.expected_version + 1  # what the conditional append made it


def _append(
    service: SessionService,
    tokens: AccessTokens,
    owned: OwnedSessions,
    authorization: str,
    app: str,
    session_id: str,
    body: dict[str, Any],
) -> tuple[bool, dict[str, Any], int]:
    """Whether the event was stored, the event, and the session's version after it: the token's
    check and the append in one hop to a thread (a dependency of its own would be a second hop,
    0.1-0.3 ms of an append of 1-2 ms). The token is checked on every call (a revoked one is
    refused at once), the session's owner once (`owned_sessions.py`)."""
    grant = _granted(tokens, authorization, write=True)
    new: NewEvent = _parsed(NewEvent, body)
    ledger_id = _ledger_id(app, grant, session_id)
    if not owned.knows(ledger_id):
        _owned(service, app, grant, session_id)  # the owner's: no second check in the append
        owned.add(ledger_id)
    event = _event_of(new.event, ledger_id, session_id)
    try:
        stored = service.append_event(event, expected_version=new.expected_version)
    except ConcurrencyConflict:
        if not _stored_before(service, event):
            raise
        stored = False
    if stored and new.expected_version is not None:
        version = new.expected_version + 1  # what the conditional append made it
    else:
        version = service.event_version(ledger_id)
    return stored, event_document(event), version


# --- state and recall ------------------------------------------------------------------------------


def _state_routes(api: FastAPI) -> None:
    service: SessionService = api.state.service

    @api.get("/apps/{app}/state")
    def user_state(app: str, grant: Reader) -> dict[str, Any]:
        """The token's user's state in the app (the `user:` keys, without the prefix)."""
        return {"user_id": grant.user_id, "state": dict(service.get_user_state(grant.user_id, app_name=app))}

    @api.get("/apps/{app}/search")
    def search(
        app: str,
        grant: Reader,
        q: Annotated[str, Query(max_length=500)] = "",
        session_id: Annotated[str | None, Query(max_length=200)] = None,
        match_mode: Annotated[str | None, Query(pattern="^(any|all)$")] = None,
        since: Annotated[str | None, Query(max_length=64)] = None,
        page: Annotated[int, Query(ge=0, le=10**6)] = 0,
    ) -> dict[str, Any]:
        """Recall: the user's events matching `q` (comma-separated terms) in one session of the app,
        archived ones included, or with no `session_id` in every session of the user."""
        recall: RecallTools = api.state.recall
        if session_id is not None:
            ledger_id = _owned(service, app, grant, session_id).id
            answer = recall.conversation_search(ledger_id, q, page, user_id=grant.user_id)
        else:
            answer = recall.cross_session_search(grant.user_id, q, match_mode, since, page)
        return {"results": [] if answer == NO_RESULTS else json.loads(answer)}
