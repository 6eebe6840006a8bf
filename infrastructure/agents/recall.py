"""`RecallTools`: the model's way back into archived history (Spring AI Session's recall tools).

`conversation_search` pages through one session's whole log by keyword, archived and synthetic
events included, so what compaction took out of the window stays findable; `cross_session_search`
does the same across every session of one user. Both return JSON text a model reads. The user is
always the caller's: no tool argument names a user or a session, and another user's session reads
as an unknown one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter, MatchMode, page_start
from sessionledger.domain.json_text import read_json
from sessionledger.domain.sessions import Session
from sessionledger.domain.times import in_utc
from sessionledger.infrastructure.async_service import AsyncSessionService
from sessionledger.infrastructure.service import SessionService

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

NO_RESULTS = "No results found."
MAX_QUERY_TERMS = 20
CONVERSATION_SEARCH = "conversation_search"
CROSS_SESSION_SEARCH = "cross_session_search"

_INNER_THOUGHT = {
    "type": "string",
    "description": "Your reasoning for this search: what you are looking for and why.",
}
_PAGE = {"type": "integer", "description": "Zero-based page of results (default 0)."}


S = TypeVar("S", SessionService, AsyncSessionService)


class _RecallRules(Generic[S]):
    """The recall tools' rules, once for both faces: each search takes the synchronous service it
    runs on (the caller's, or the async service's pool thread, one hop a search)."""

    def __init__(self, service: S, *, page_size: int = EventFilter.DEFAULT_PAGE_SIZE) -> None:
        if service is None:
            raise ValueError("service must not be None")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size <= 0:
            raise ValueError("page_size must be positive")
        self._service: S = service
        self._page_size = page_size

    @property
    def names(self) -> frozenset[str]:
        return frozenset({CONVERSATION_SEARCH, CROSS_SESSION_SEARCH})

    @property
    def max_payload_bytes(self) -> int:
        """The payload limit of the service's ledger, which the tools' results are stored in."""
        return self._service.settings.max_payload_bytes

    def _owner_of(self, service: SessionService, session_id: str) -> str | None:
        session = service.get_session(session_id)
        return None if session is None else session.user_id

    def _conversation_search(
        self,
        service: SessionService,
        session_id: str,
        query: str | None,
        page: int | None,
        user_id: str | None,
    ) -> str:
        _check_query(query)
        search = EventFilter.keyword_search(query or "", _page(page), self._page_size)
        events = service.get_events(session_id, search, user_id=user_id)
        return _render([_item(event) for event in events if _has_text(event)])

    def _cross_session_search(
        self,
        service: SessionService,
        user_id: str,
        query: str | None,
        match_mode: str | None,
        since: str | None,
        page: int | None,
    ) -> str:
        if not isinstance(user_id, str) or not user_id.strip():
            raise ValueError("userId must not be empty")
        _check_query(query)
        search = _cross_filter(query, match_mode, _since(since))
        first = page_start(_page(page), self._page_size)
        sessions = service.list_sessions(user_id)
        found = _earliest(service, sessions, search, first + self._page_size, user_id)
        found.sort(key=lambda pair: pair[0])  # stable: list order, then ledger order, within one instant
        return _render([item for _, item in found[first : first + self._page_size]])

    def definitions(self) -> list[dict[str, Any]]:
        """OpenAI Chat Completions tool definitions of both tools."""
        return [
            _function(
                CONVERSATION_SEARCH,
                "Search the full prior conversation history using case-insensitive keyword matching. "
                "Returns paginated results ordered chronologically.",
                {
                    "innerThought": _INNER_THOUGHT,
                    "query": {
                        "type": "string",
                        "description": "Keyword to search for; empty lists every message.",
                    },
                    "page": _PAGE,
                },
            ),
            _function(
                CROSS_SESSION_SEARCH,
                "Search every earlier conversation of the current user by keywords. Returns paginated "
                "results ordered by time, each with the conversation it comes from.",
                {
                    "innerThought": _INNER_THOUGHT,
                    "query": {
                        "type": "string",
                        "description": "Comma-separated search terms (at most 20); empty matches everything.",
                    },
                    "matchMode": {
                        "type": "string",
                        "enum": ["any", "all"],
                        "description": "'all' requires every term, anything else any term (default).",
                    },
                    "since": {
                        "type": "string",
                        "description": "Only messages since this ISO-8601 instant (2026-07-01T00:00:00Z).",
                    },
                    "page": _PAGE,
                },
            ),
        ]

    def _handle(
        self, service: SessionService, name: str, arguments: str | None, session_id: str, user_id: str
    ) -> str:
        try:
            if not isinstance(user_id, str) or not user_id.strip():
                raise ValueError("the caller's user_id must not be empty")
            if not isinstance(session_id, str) or not session_id.strip():
                raise ValueError("the caller's session_id must not be empty")
            args = _arguments(arguments)
            if name == CONVERSATION_SEARCH:
                return self._conversation_search(
                    service, session_id, _required_query(args), _optional_int(args, "page"), user_id
                )
            if name == CROSS_SESSION_SEARCH:
                return self._cross_session_search(
                    service,
                    user_id,
                    _required_query(args),
                    _optional_str(args, "matchMode"),
                    _optional_str(args, "since"),
                    _optional_int(args, "page"),
                )
            raise ValueError(
                f"unknown tool {name!r}; the tools are {CONVERSATION_SEARCH}, {CROSS_SESSION_SEARCH}"
            )
        except ValueError as error:
            return f"Error: {error}"


class RecallTools(_RecallRules[SessionService]):
    """The two recall tools over one service, as methods, OpenAI tool definitions and a handler."""

    def owner_of(self, session_id: str) -> str | None:
        """The user a session belongs to, for a caller that named none; `None` when it is unknown."""
        return self._owner_of(self._service, session_id)

    def conversation_search(
        self, session_id: str, query: str | None, page: int | None = 0, *, user_id: str | None = None
    ) -> str:
        """Page `max(0, page)` of the session's events matching `query` (case-insensitive), in ledger
        order; events with blank text are dropped after paging; a blank query pages through every
        event. With `user_id`, another user's session gives `"No results found."` like an unknown one.
        """
        return self._conversation_search(self._service, session_id, query, page, user_id)

    def cross_session_search(
        self,
        user_id: str,
        query: str | None,
        match_mode: str | None = None,
        since: str | None = None,
        page: int | None = 0,
    ) -> str:
        """Matches in every session of `user_id` (every app), oldest first by timestamp.

        `query` is comma-separated terms: one is a keyword, several match ANY of them, or ALL with
        `match_mode="all"`; a blank query matches every event. `since` is an ISO-8601 instant with an
        offset or `Z`.
        """
        return self._cross_session_search(self._service, user_id, query, match_mode, since, page)

    def handle(self, name: str, arguments: str | None, *, session_id: str, user_id: str) -> str:
        """Run one tool call the model produced; every failure is an `"Error: ..."` string.

        `session_id` and `user_id` are the caller's; the model's arguments cannot change them.
        """
        return self._handle(self._service, name, arguments, session_id, user_id)

    def as_langchain_tools(self, session_id: str, *, user_id: str) -> list[BaseTool]:
        """Both tools as LangChain tools (extra `langgraph`) for a LangGraph agent (`ToolNode`,
        `create_react_agent`) or `bind_tools`: the names, descriptions and argument schemas of
        `definitions()`, each call answered by `handle` for this session and user, which no
        argument can change."""
        from langchain_core.tools import StructuredTool  # the agents layer needs no langchain-core

        if not isinstance(user_id, str) or not user_id.strip():
            raise ValueError("user_id must not be empty")
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError("session_id must not be empty")

        def tool(definition: dict[str, Any]) -> BaseTool:
            name = definition["name"]

            def answer(**arguments: Any) -> str:
                return self.handle(name, json.dumps(arguments), session_id=session_id, user_id=user_id)

            return StructuredTool(
                name=name,
                description=definition["description"],
                args_schema=definition["parameters"],
                func=answer,
            )

        return [tool(definition["function"]) for definition in self.definitions()]


class AsyncRecallTools(_RecallRules[AsyncSessionService]):
    """`RecallTools` on an `AsyncSessionService`: the same arguments, answers and definitions, every
    search a coroutine run in one hop to the service's pool (a cross-session search included)."""

    async def owner_of(self, session_id: str) -> str | None:
        """`RecallTools.owner_of`."""
        return await self._service.run(lambda service: self._owner_of(service, session_id))

    async def conversation_search(
        self, session_id: str, query: str | None, page: int | None = 0, *, user_id: str | None = None
    ) -> str:
        """`RecallTools.conversation_search`."""
        return await self._service.run(
            lambda service: self._conversation_search(service, session_id, query, page, user_id)
        )

    async def cross_session_search(
        self,
        user_id: str,
        query: str | None,
        match_mode: str | None = None,
        since: str | None = None,
        page: int | None = 0,
    ) -> str:
        """`RecallTools.cross_session_search`."""
        return await self._service.run(
            lambda service: self._cross_session_search(service, user_id, query, match_mode, since, page)
        )

    async def handle(self, name: str, arguments: str | None, *, session_id: str, user_id: str) -> str:
        """`RecallTools.handle`: every failure an `"Error: ..."` string."""
        return await self._service.run(
            lambda service: self._handle(service, name, arguments, session_id, user_id)
        )


def instant_text(moment: datetime) -> str:
    """`moment` as Java's `Instant.toString` prints it: UTC, `Z`, fractions in groups of 3 or 6 digits."""
    moment = moment.astimezone(UTC)
    micros = moment.microsecond
    if micros == 0:
        fraction = ""
    elif micros % 1000 == 0:
        fraction = f".{micros // 1000:03d}"
    else:
        fraction = f".{micros:06d}"
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": ["innerThought", "query"],
            },
        },
    }


def _has_text(event: SessionEvent) -> bool:
    return bool((event.message.text or "").strip())


def _item(event: SessionEvent) -> dict[str, str]:
    return {
        "timestamp": instant_text(event.timestamp),
        "type": event.type.value,
        "text": event.message.text or "",
    }


def _render(items: list[dict[str, str]]) -> str:
    if not items:
        return NO_RESULTS
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"))


def _check_query(query: object) -> None:
    if query is not None and not isinstance(query, str):
        raise ValueError(f"query must be a string, got {type(query).__name__}")


def _page(page: object) -> int:
    if page is None:
        return 0
    if isinstance(page, bool) or not isinstance(page, int):
        raise ValueError(f"page must be an integer, got {page!r}")
    return max(0, page)


def _since(since: str | None) -> datetime | None:
    if since is None or not since.strip():
        return None
    example = "(e.g. '2026-07-01T00:00:00Z')"
    try:
        moment = datetime.fromisoformat(since.strip())
    except ValueError:
        raise ValueError(f"since '{since}' is not a valid ISO-8601 instant {example}") from None
    if moment.tzinfo is None:
        raise ValueError(
            f"since '{since}' is not a valid ISO-8601 instant: it needs an offset or Z {example}"
        )
    return in_utc(moment, "since")


def _cross_filter(query: str | None, match_mode: str | None, since: datetime | None) -> EventFilter:
    if query is None or not query.strip():
        return EventFilter(start=since)
    terms = [term.strip() for term in query.split(",") if term.strip()]
    if not terms:
        raise ValueError(f"query '{query}' contained no usable search terms after splitting on ','")
    if len(terms) > MAX_QUERY_TERMS:
        raise ValueError(
            f"query '{query}' has {len(terms)} search terms; at most {MAX_QUERY_TERMS} are allowed"
        )
    if len(terms) == 1:
        return EventFilter(keyword=terms[0], start=since)
    mode = MatchMode.ALL if isinstance(match_mode, str) and match_mode.lower() == "all" else MatchMode.ANY
    return EventFilter(keywords=tuple(terms), match_mode=mode, start=since)


Found = list[tuple[datetime, dict[str, str]]]


def _earliest(
    service: SessionService, sessions: list[Session], search: EventFilter, wanted: int, user_id: str
) -> Found:
    """Every match with text that can be among the `wanted` earliest by timestamp, in session
    order, then log order, and more: what sorting all of them would give first, without reading
    them all (a common keyword over 50,000 events read 1.6 s, 70 MiB).

    First each session's first `wanted` matches in log order (a page: the index or a short walk);
    if none of them was cut off, that is every match. Otherwise the `wanted`-th earliest of them,
    `bound`, bounds the answer: at least `wanted` matches are at or before it, so no later one is
    among the first `wanted`; the second pass reads each session's matches up to `bound`, the
    ties at `bound` included (a session's log order need not follow its timestamps)."""
    paged = search.merge(EventFilter(page=0, page_size=wanted))
    sample: Found = []
    cut = False
    for session in sessions:
        events = service.get_events(session.id, paged, user_id=user_id)
        cut = cut or len(events) == wanted
        sample += _with_text(session.id, events)
    if not cut:
        return sample
    if len(sample) < wanted:  # blank texts filled some pages: no bound from them
        up_to = search
    else:
        up_to = search.merge(EventFilter(end=sorted(moment for moment, _ in sample)[wanted - 1]))
    found: Found = []
    for session in sessions:
        found += _with_text(session.id, service.get_events(session.id, up_to, user_id=user_id))
    return found


def _with_text(session_id: str, events: list[SessionEvent]) -> Found:
    return [(e.timestamp, {"sessionId": session_id, **_item(e)}) for e in events if _has_text(e)]


def _arguments(arguments: str | None) -> dict[str, Any]:
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if not isinstance(arguments, str):
        raise ValueError("arguments must be a JSON string")
    try:
        parsed = read_json(arguments)
    except json.JSONDecodeError as error:
        raise ValueError(f"arguments are not valid JSON ({error.msg} at position {error.pos})") from None
    if not isinstance(parsed, dict):
        raise ValueError("arguments must be a JSON object")
    return parsed


def _required_query(args: dict[str, Any]) -> str | None:
    if "query" not in args:
        raise ValueError("missing required argument 'query'")
    query = args["query"]
    if query is not None and not isinstance(query, str):
        raise ValueError("'query' must be a string")
    return query


def _optional_str(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"'{name}' must be a string")
    return value


def _optional_int(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"'{name}' must be an integer")
    return value
