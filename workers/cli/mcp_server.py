"""The MCP server `sessionledger mcp` runs: recall for any agent that speaks the Model Context Protocol.

Tools `conversation_search(query, session_id, page=0)` and `cross_session_search(query,
match_mode=None, since=None, page=0)` answer exactly as `RecallTools.handle` does (the same JSON
text, the same argument rules), and resources `session://{session_id}/window` and
`session://{session_id}/timeline` are what `sessionledger events --json` and `sessionledger
timeline --json` print. No argument names a user, and another user's session answers exactly as a
missing one does. On stdio the user is fixed when the server starts; on streamable HTTP it is the
user of each request's bearer token (`BearerTokens`, the check `sessionledger serve` makes), and a
request without a valid token is answered 401 before the SDK sees it. The token's user is also handed
to the SDK as the request's authenticated user, so the SDK binds each MCP session to the user who
opened it: another user's request with that session id is answered as an unknown session (404).

Why the SDK's low-level `Server` and not its decorator API (`MCPServer`): the decorators validate
arguments with pydantic before the tool runs, which answers a wrong type with a many-line message
that repeats the caller's input (all of a 1 MB query) and re-parses JSON-looking strings (a query
`"null"` became `None`); taking the raw arguments leaves every rule to `RecallTools.handle`, once.
Every failure is one line: a tool's is an `isError` result, a resource's a JSON-RPC error. The
service is synchronous, so each call runs on a worker thread and the event loop keeps serving.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote

import anyio.to_thread
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from sessionledger.domain.codec import event_document
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.ports import AccessTokens
from sessionledger.infrastructure import audit
from sessionledger.infrastructure.agents.recall import CONVERSATION_SEARCH, RecallTools
from sessionledger.infrastructure.service import SessionService
from sessionledger.workers.bearer import bearer_token, grant_for
from sessionledger.workers.cli.app import json_text
from sessionledger.workers.failures import operator_message
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from sessionledger import __version__

__all__ = ["MAX_ERROR_CHARS", "BearerTokens", "one_line", "recall_server", "serve_http", "serve_stdio"]

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 300
"""An error quotes the caller's input (a query, a session id): cut to this, so that a 1 MB query
does not come back as a 1 MB error."""
_URI = re.compile(r"session://(?P<session_id>.+)/(?P<view>window|timeline)", re.DOTALL)
_VIEWS = {
    "window": "The session's active window, as `sessionledger events SESSION --json` prints it.",
    "timeline": "The session's whole history (appends, compactions, rewinds, erasure), as "
    "`sessionledger timeline SESSION --json` prints it.",
}
_NO_SESSION = "-"
"""`RecallTools.handle` wants the caller's session for any tool; a cross-session search reads none."""
_MCP_NAMES = {"matchMode": "match_mode"}
"""`RecallTools.definitions()` names its arguments as Spring AI does; these tools as Python does."""
_ISSUER = "sessionledger"
"""The `client_id` of the SDK's access token `BearerTokens` makes: one issuer, the user as its subject."""


def one_line(text: str) -> str:
    """`text` on one line (whitespace runs become one space), at most `MAX_ERROR_CHARS` long: the
    middle is cut, where a quoted input sits, so that the start and the verdict at the end stay."""
    text = " ".join(text.split())
    if len(text) <= MAX_ERROR_CHARS:
        return text
    half = (MAX_ERROR_CHARS - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def recall_server(service: SessionService, user_id: str | None) -> Server[Any]:
    """An MCP server over `service` answering for `user_id` alone, or, when `user_id` is None, for
    the user of each request's bearer token (served through `BearerTokens`; a request that did not
    pass it is refused, so no path answers for nobody in particular)."""
    if user_id is not None and (not isinstance(user_id, str) or not user_id.strip()):
        raise ValueError("user_id must not be empty")
    recall = _Recall(service, _request_caller if user_id is None else lambda ctx: user_id)
    return Server(
        "sessionledger",
        version=__version__,
        instructions="Recall: search this user's earlier conversations; read a session's window, timeline.",
        on_list_tools=recall.list_tools,
        on_call_tool=recall.call_tool,
        on_list_resources=recall.list_resources,
        on_list_resource_templates=recall.list_resource_templates,
        on_read_resource=recall.read_resource,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client on this process's stdin and stdout until it closes them."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server[Any], tokens: AccessTokens, host: str, listening: socket.socket) -> None:
    """Serve streamable HTTP at `/mcp` on the `listening` socket (bound to `host`) until
    interrupted, every request behind a bearer token from `tokens` (the SDK's DNS-rebinding
    protection is on for a loopback `host`).

    Stateless: recall keeps nothing between requests, so no MCP session is held for a client.
    With sessions, the SDK's 10,000 for the whole server, each kept 30 minutes idle, were one
    budget for every user: one token's holder opening them all shut every other user out."""
    import uvicorn

    app = BearerTokens(server.streamable_http_app(host=host, stateless_http=True), tokens)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[listening])


class BearerTokens:
    """ASGI middleware: an HTTP request reaches `app` only with `Authorization: Bearer TOKEN` for a
    token `sessionledger serve` would accept (`workers.bearer`), checked on every request, so a
    revoked token stops at its next one; the token's user is the caller of that request. An admin
    token is its own user's here: recall answers for one user, never for every user at once."""

    def __init__(self, app: ASGIApp, tokens: AccessTokens) -> None:
        self._app = app
        self._tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan (the SDK's session manager starts there)
            await self._app(scope, receive, send)
            return
        token = bearer_token(Headers(scope=scope).get("authorization", ""))
        grant = await anyio.to_thread.run_sync(grant_for, self._tokens, token) if token else None
        if grant is None:
            refusal = JSONResponse(
                {
                    "error": "invalid_token",
                    "error_description": "a bearer token is needed (sessionledger token create --user USER)",
                },
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
            await refusal(scope, receive, send)
            return
        await self._app({**scope, "user": _authenticated(grant.user_id)}, receive, send)


def _authenticated(user_id: str) -> AuthenticatedUser:
    """The token's user as the SDK's authenticated user, its subject: what `_request_caller` reads
    for each request (and, were sessions kept, the principal the SDK would hold each one to)."""
    return AuthenticatedUser(AccessToken(token="", client_id=_ISSUER, scopes=[], subject=user_id))


def _request_caller(ctx: ServerRequestContext[Any]) -> str:
    """The user `BearerTokens` found for the HTTP request that carried this message."""
    request = ctx.request
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    caller = user.access_token.subject if isinstance(user, AuthenticatedUser) else None
    if not isinstance(caller, str):
        raise RuntimeError("this request did not come through BearerTokens: it names no user")
    return caller


class _Recall:
    """The request handlers: one service, and who the caller of a request is."""

    def __init__(self, service: SessionService, caller: Callable[[ServerRequestContext[Any]], str]) -> None:
        self._service = service
        self._caller = caller
        self._tools = RecallTools(service)
        self._listed = [_tool(definition["function"]) for definition in self._tools.definitions()]

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._listed)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            user = self._caller(ctx)
            answer = await anyio.to_thread.run_sync(
                self._answer, user, params.name, dict(params.arguments or {})
            )
        except Exception as error:
            return _tool_error(self._unexpected(error, f"tool {params.name!r}"))
        if answer.startswith("Error: "):
            return _tool_error(answer.removeprefix("Error: "))
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])

    def _answer(self, user: str, name: str, arguments: dict[str, Any]) -> str:
        session_id = _NO_SESSION
        if name == CONVERSATION_SEARCH:
            session_id = arguments.pop("session_id", None)
            if session_id is None:
                return "Error: missing required argument 'session_id'"
            if not isinstance(session_id, str) or not session_id.strip():
                return "Error: 'session_id' must be a non-empty string"
        for ours, theirs in _MCP_NAMES.items():
            if theirs in arguments:
                arguments[ours] = arguments.pop(theirs)
        return self._tools.handle(name, json.dumps(arguments), session_id=session_id, user_id=user)

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """Both views of each of the user's sessions, oldest session first (an id is percent-encoded,
        as RFC 6570 expands the template: an ADK session `app/user/id` is `app%2Fuser%2Fid`; a read
        takes it either way)."""
        sessions = await anyio.to_thread.run_sync(self._service.list_sessions, self._caller(ctx))
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=f"session://{quote(session.id, safe='')}/{view}",  # as the template expands it
                    name=f"{session.id} {view}",
                    description=description,
                    mime_type="application/json",
                )
                for session in sessions
                for view, description in _VIEWS.items()
            ]
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=f"session://{{session_id}}/{view}",
                    name=view,
                    description=description,
                    mime_type="application/json",
                )
                for view, description in _VIEWS.items()
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        found = _URI.fullmatch(uri)
        if found is None:
            raise _resource_error(
                f"unknown resource {uri!r}: the resources are session://{{session_id}}/window "
                "and session://{session_id}/timeline"
            )
        session_id, view = unquote(found["session_id"]), found["view"]
        try:
            user = self._caller(ctx)
            text = await anyio.to_thread.run_sync(functools.partial(self._read, user, session_id, view))
        except MCPError:
            raise
        except Exception as error:
            raise _resource_error(
                self._unexpected(error, f"resource {uri!r}"), types.INTERNAL_ERROR
            ) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type="application/json")]
        )

    def _read(self, user: str, session_id: str, view: str) -> str:
        """The view's JSON; another user's session is as unknown as a missing one."""
        if view == "timeline":
            try:
                entries = audit.timeline(self._service, session_id, user_id=user)
            except LookupError:
                raise _resource_error(f"unknown session {session_id!r}") from None
            return json_text([entry.as_dict() for entry in entries])
        if self._service.get_session(session_id, user_id=user) is None:
            raise _resource_error(f"unknown session {session_id!r}")
        events = self._service.get_events(session_id, EventFilter.active(), user_id=user)
        return json_text([event_document(event) for event in events])

    def _unexpected(self, error: Exception, what: str) -> str:
        """A failure of the ledger (or a bug) as one line; a bug's traceback goes to the log only."""
        message = operator_message(error, self._service.settings)
        if message is None:
            logger.exception("%s failed", what)
            return f"{what} failed: {type(error).__name__} (the server's log has the details)"
        return message


def _tool(function: dict[str, Any]) -> types.Tool:
    """An MCP tool from a `RecallTools.definitions()` function, arguments in Python's spelling:
    no `innerThought` (an MCP client has no use for it), and `conversation_search` names its session."""
    schema = function["parameters"]
    properties = {
        _MCP_NAMES.get(name, name): spec
        for name, spec in schema["properties"].items()
        if name != "innerThought"
    }
    required = [_MCP_NAMES.get(name, name) for name in schema["required"] if name != "innerThought"]
    if function["name"] == CONVERSATION_SEARCH:
        properties["session_id"] = {"type": "string", "description": "The conversation to search."}
        required.append("session_id")
    return types.Tool(
        name=function["name"],
        description=function["description"],
        input_schema={"type": "object", "properties": properties, "required": required},
    )


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=one_line(message))], is_error=True
    )


def _resource_error(message: str, code: int = types.INVALID_PARAMS) -> MCPError:
    """A JSON-RPC error: invalid params (an unknown session or resource, as the SDK's own
    `ResourceNotFoundError` is) unless the ledger failed."""
    return MCPError(code, one_line(message))
