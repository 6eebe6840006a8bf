"""The audit page's ASGI application: routes (docs/api.md "The audit page"), login, and answers as
HTML or, for `Accept: application/json`, the same data as JSON.

The pages are read-only: their only POST is `/login`, which sets an HttpOnly, SameSite=Strict
cookie (Secure over https) and refuses a form posted from another origin; everything else is a GET
through `AuditViews`. The HTTP session API (`workers.web.session_api`), which writes through a
service of its own, is mounted at `/api/v1` with the same tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Form, Query, Request
from fastapi import Path as FastPath
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from fastapi.templating import Jinja2Templates
from sessionledger.domain.access import Grant
from sessionledger.domain.ports import AccessTokens
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.loop_appends import LoopAppends
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.workers.bearer import grant_for
from sessionledger.workers.web.access import COOKIE, SignedOut, requested_grant
from sessionledger.workers.web.session_api import session_api
from sessionledger.workers.web.views import AuditViews, Unknown

from sessionledger import __version__

__all__ = ["audit_app"]

_TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
Signed = Annotated[Grant, Depends(requested_grant)]
Page = Annotated[int, Query(ge=1, le=10**9)]


def audit_app(
    service: SessionService,
    tokens: AccessTokens,
    *,
    database: str = "",
    digest_dir: Path | None = None,
    digest_public_key: str | None = None,
    writer: SessionService | None = None,
    loop_appends: LoopAppends | None = None,
) -> FastAPI:
    """The application over one ledger (`database` is only shown, its password masked).

    With `writer`, a service on the same ledger that may write, the HTTP session API is mounted
    at `/api/v1` over it (its common appends made on the event loop with `loop_appends`, the
    writer's: `Storage.loop_appends`); the pages keep reading through `service` (`serve` opens it
    read-only)."""
    app = FastAPI(
        title="sessionledger audit", version=__version__, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.tokens = tokens
    app.state.views = AuditViews(service, digest_dir, digest_public_key)
    app.state.database = hide_passwords(database)
    app.add_exception_handler(SignedOut, _signed_out)
    app.add_exception_handler(Unknown, _unknown)
    app.add_exception_handler(ValueError, _bad_request)
    for route in _ROUTES:
        route(app)
    if writer is not None:
        app.mount("/api/v1", session_api(writer, tokens, loop_appends))
        # matched first: an append is then routed past one prefix, not every page's pattern (the
        # pages' paths never start with /api/v1; 10-15 us of an append's 0.2 ms in the framework)
        app.router.routes.insert(0, app.router.routes.pop())
    return app


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _answer(request: Request, template: str, data: dict[str, Any], grant: Grant | None = None) -> Response:
    """The page's data as JSON when asked for, else rendered."""
    if _wants_json(request):
        return JSONResponse(data)
    context = {"data": data, "grant": grant, "database": request.app.state.database}
    return _TEMPLATES.TemplateResponse(request, template, context)


def _signed_out(request: Request, _: Exception) -> Response:
    if _wants_json(request):
        return JSONResponse({"error": "a token is needed"}, 401, headers={"WWW-Authenticate": "Bearer"})
    return RedirectResponse("/login", 303)


def _unknown(request: Request, _: Exception) -> Response:
    """Missing and another user's are the same 404, with nothing of the name's owner in it."""
    if _wants_json(request):
        return JSONResponse({"error": "not found"}, 404)
    return _TEMPLATES.TemplateResponse(request, "error.html", {"message": "not found", "grant": None}, 404)


def _bad_request(request: Request, error: Exception) -> Response:
    message = hide_passwords(str(error).strip("'\""))
    if _wants_json(request):
        return JSONResponse({"error": message}, 400)
    return _TEMPLATES.TemplateResponse(request, "error.html", {"message": message, "grant": None}, 400)


def _moment(text: str | None, name: str) -> datetime | None:
    """A time from a query: ISO-8601; without a zone (a browser's datetime-local field) it is UTC."""
    if not text:
        return None
    from sessionledger.domain.codec import parse_timestamp

    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{name} must be an ISO-8601 time, e.g. 2026-01-31T12:00Z, not {text[:40]!r}"
        ) from None
    if moment.tzinfo is None:
        return parse_timestamp(moment.isoformat() + "+00:00")
    return moment


def _from_this_site(request: Request) -> bool:
    """Whether a login was posted from this server's own page: its `Origin` is this server's, or,
    from a client that sends none (curl, an older browser), its `Sec-Fetch-Site` does not name
    another site. An `Origin` of `null` (a sandboxed frame, a cross-origin redirect) is refused:
    a page elsewhere could otherwise log a visitor's browser in with its author's token, and the
    visitor would audit the author's sessions as their own."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin.rstrip("/") == str(request.base_url).rstrip("/")
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


def _login_routes(app: FastAPI) -> None:
    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request) -> Response:
        return _TEMPLATES.TemplateResponse(request, "login.html", {"error": None, "grant": None})

    @app.post("/login")
    def login(request: Request, token: Annotated[str, Form(max_length=512)] = "") -> Response:
        if not _from_this_site(request):
            return PlainTextResponse("cross-origin login refused", 403)
        if grant_for(request.app.state.tokens, token) is None:
            context = {"error": "that token opens nothing (unknown, revoked or mistyped)", "grant": None}
            return _TEMPLATES.TemplateResponse(request, "login.html", context, 401)
        response = RedirectResponse("/", 303)
        secure = request.url.scheme == "https"
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure, path="/")
        return response

    @app.get("/logout")
    def logout() -> Response:
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE, path="/")
        return response


def _page_routes(app: FastAPI) -> None:
    views: AuditViews = app.state.views

    @app.get("/")
    def sessions(
        request: Request,
        grant: Signed,
        q: Annotated[str, Query(max_length=200)] = "",
        since: str | None = None,
        until: str | None = None,
        page: Page = 1,
    ) -> Response:
        data = views.sessions(grant, q.strip(), _moment(since, "since"), _moment(until, "until"), page)
        return _answer(request, "sessions.html", data, grant)

    @app.get("/sessions/{session_id:path}/records/{position}")
    def record(
        request: Request,
        grant: Signed,
        session_id: str,
        position: Annotated[int, FastPath(ge=1, le=2**62)],
        page: Page = 1,
    ) -> Response:
        return _answer(request, "record.html", views.record(grant, session_id, position, page), grant)

    @app.get("/sessions/{session_id:path}/window")
    def window(
        request: Request,
        grant: Signed,
        session_id: str,
        version: Annotated[int | None, Query(ge=0)] = None,
        page: Annotated[int | None, Query(ge=1, le=10**9)] = None,
    ) -> Response:
        return _answer(request, "window.html", views.window(grant, session_id, version, page), grant)

    @app.get("/sessions/{session_id:path}/events/{event_id}")
    def event(
        request: Request,
        grant: Signed,
        session_id: str,
        event_id: str,
        page: Annotated[int | None, Query(ge=1, le=10**9)] = None,
    ) -> Response:
        return _answer(request, "event.html", views.event(grant, session_id, event_id, page), grant)

    @app.get("/sessions/{session_id:path}/verify")
    def verify(
        request: Request,
        grant: Signed,
        session_id: str,
        everything: Annotated[bool, Query(alias="all")] = False,
    ) -> Response:
        return _answer(request, "verify.html", views.verify(grant, session_id, everything), grant)

    @app.get("/ledger")
    def ledger(request: Request, grant: Signed) -> Response:
        return _answer(request, "ledger.html", views.ledger(grant), grant)

    # last: a session id may hold slashes (an ADK session is app/user/id), so this route would
    # take every other route's path as a session id before them
    @app.get("/sessions/{session_id:path}")
    def timeline(request: Request, grant: Signed, session_id: str, page: Page = 1) -> Response:
        return _answer(request, "timeline.html", views.timeline(grant, session_id, page), grant)


def _download_routes(app: FastAPI) -> None:
    views: AuditViews = app.state.views

    @app.get("/sessions/{session_id:path}/export")
    def export(grant: Signed, session_id: str) -> Response:
        lines = views.export(grant, session_id)
        first = next(lines)  # the session's visibility is checked before the answer starts
        return StreamingResponse(
            _chained(first, lines),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{_file_name(session_id)}.jsonl"'},
        )

    @app.get("/sessions/{session_id:path}/events/{event_id}/proof")
    def proof(grant: Signed, session_id: str, event_id: str) -> Response:
        name = _file_name(f"{session_id}-{event_id}")
        return Response(
            views.proof(grant, session_id, event_id),
            media_type="application/json",
            headers={"Content-Disposition": f'attachment; filename="{name}.proof.json"'},
        )


def _chained(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


def _file_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:120]


_ROUTES = (_login_routes, _download_routes, _page_routes)
"""In this order: the downloads' paths end in what the pages' would take as part of an id."""
