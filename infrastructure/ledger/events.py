"""A session's events as `get_events` reads them: archived, then the window, each filter field but
`pattern` in SQL (`statements.criteria`; `statements.last_rows` and `statements.page_rows` read only
as far as `last_n` or the page needs), or, for a keyword the index answers, only the rows the index
names (`text_index.candidates`). SQLAlchemy Core on a `Connection`: the statement is built once per
filter shape and route (`EventReads._query`), its compiled form cached by SQLAlchemy; the active
window, the read an agent makes before every prompt, is the window read of `window.py`, on the
driver (0.77x the time of this path's statement for 1,000 events)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.codec import event_from_payload
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.infrastructure.ledger import statements, text_index
from sessionledger.infrastructure.ledger.schema import AnySelect, ledger, sessions
from sessionledger.infrastructure.ledger.window import WindowReads

ARCHIVED = 0
"""The `statements.GROUP` of archived events."""
ACTIVE = EventFilter.active()
WALK = 1_000
"""Positions a keyword page reads in order before it asks the index (`_walked`)."""


class EventReads:
    """The filtered event reads of one database, each statement built once per filter shape
    (`statements.filter_shape`) and route, then run with the filter's values: a read made on every
    agent turn (a recall search) builds no SQLAlchemy statement, whose objects held in reference
    cycles left the collector ~500 objects a turn, and its build half the read's time."""

    def __init__(self, engine: sa.Engine, window: WindowReads) -> None:
        self._engine = engine
        self._window = window
        self._queries: dict[tuple[object, ...], AnySelect] = {}

    def events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        if filter == ACTIVE:
            return self._window.events(session_id)
        in_python = _in_python(filter)
        bounded = not in_python and (filter.last_n is not None or filter.page_size is not None)
        values: dict[str, Any] = {"sid": session_id, **statements.filter_values(filter)}
        with self._engine.connect() as conn:
            plan = _plan(conn, session_id, filter)
            if plan is not None and filter.page_size is not None and bounded and filter.last_n is None:
                rows = self._walked(conn, values, filter, plan)
                if rows is not None:
                    return _events(session_id, rows)
            positions = None if plan is None else text_index.candidates(conn, session_id, filter)
            if positions is not None:  # the index's rows, re-checked by every criterion, in log order
                route, values["positions"] = "index", positions
            elif bounded and filter.last_n is not None:
                route, values["n"] = "last", filter.last_n
            elif bounded and filter.page_size is not None:
                route = "page"
                values.update(statements.page_values((filter.page or 0) * filter.page_size, filter.page_size))
            else:
                route = "all"
            if route == "index" and not in_python:
                values.update(_bounds(filter))
            rows = list(conn.execute(self._query(route, filter, in_python), values).all())
        if bounded and filter.last_n is not None:
            rows.reverse()
        events = _events(session_id, rows)
        return filter.select(events) if in_python else events

    def _query(self, route: str, filter: EventFilter, in_python: bool) -> AnySelect:
        """The statement of `route` for filters of this one's shape: `walk` (`_walked`), `index`
        (the rows at `:positions`), `last` (`statements.last_rows`), `page` (`statements.page_rows`)
        or `all` (every matching row in log order); `in_python` as `_in_python(filter)` says."""
        key = (
            route,
            statements.filter_shape(filter),
            in_python,
            filter.last_n is not None,
            filter.page_size is not None,
        )
        query = self._queries.get(key)
        if query is None:
            query = self._queries[key] = _built(route, filter, in_python, self._engine.dialect)
        return query

    def _walked(
        self, conn: sa.Connection, values: dict[str, Any], filter: EventFilter, plan: tuple[int, int]
    ) -> list[sa.Row[Any]] | None:
        """The page from the session's first `WALK` positions, when they settle it; `None` when not.

        A keyword most events hold fills its page within a few rows, where the index would read
        every match first. Log order is the archived rows by position, the window prefix, then the
        tail by position: rows up to `WALK` are a leading part of the archived group (of the tail
        when nothing was ever compacted, `window_base` 0), so the page is settled when that part
        holds it.
        """
        assert filter.page_size is not None  # a page read (the caller's check)
        offset = (filter.page or 0) * filter.page_size
        page = {**values, **statements.page_values(0, offset + filter.page_size)}
        found = list(conn.execute(self._query("walk", filter, in_python=False), page).all())
        settled = found if plan[1] == 0 else [row for row in found if row[2] == ARCHIVED]
        if len(settled) < offset + filter.page_size:
            return None
        return settled[offset:]


def _in_python(filter: EventFilter) -> bool:
    """Whether the filter is checked (and windowed) in Python once SQL has read its candidates: a
    `pattern`, or a keyword with a sigma (`text_index.sigma_terms`)."""
    return filter.pattern is not None or text_index.sigma_terms(filter)


def _built(route: str, filter: EventFilter, in_python: bool, dialect: sa.Dialect) -> AnySelect:
    """`EventReads._query`'s statement, built."""
    query = statements.LIVE_EVENTS.add_columns(ledger.c.event_id, ledger.c.payload)
    query = query.where(*statements.criteria(filter, dialect))
    archived = not filter.exclude_archived
    if route == "walk":
        return statements.page_rows(query.where(ledger.c.position <= WALK), archived)
    if route == "index":
        positions: sa.BindParameter[int] = sa.bindparam("positions", expanding=True)
        return _ordered(query.where(ledger.c.position.in_(positions)), filter, in_python)
    if route == "last":
        return statements.last_rows(query, archived)
    if route == "page":
        return statements.page_rows(query, archived)
    return _ordered(query, filter, in_python=True)


def _events(session_id: str, rows: Sequence[Any]) -> list[SessionEvent]:
    # unpacked, not read by attribute: a Core row's attribute lookup costs more, 1,000 times a read
    return [
        event_from_payload(session_id, event_id, payload, group == ARCHIVED)
        for event_id, payload, group in rows
    ]


PLAN_HEAD = sa.select(sessions.c.head_position, sessions.c.window_base).where(statements.LIVE_SESSION)


def _plan(conn: sa.Connection, session_id: str, filter: EventFilter) -> tuple[int, int] | None:
    """The session's head position and window base when the index may pay: the filter has terms
    it can narrow by and the session is longer than a walk; `None` when the scan is the plan
    (always on MariaDB and MySQL, which have no index: no read of the head for nothing)."""
    if conn.dialect.name == "mysql" or text_index.index_terms(filter) is None:
        return None
    head = conn.execute(PLAN_HEAD, {"sid": session_id}).first()
    return None if head is None or head[0] <= WALK else (head[0], head[1])


def _bounds(filter: EventFilter) -> dict[str, int]:
    """The `:offset` and `:limit` of `_ordered`'s statement for this filter."""
    if filter.last_n is not None:
        return {"limit": filter.last_n}
    if filter.page_size is not None:
        return {"offset": (filter.page or 0) * filter.page_size, "limit": filter.page_size}
    return {}


def _ordered(query: AnySelect, filter: EventFilter, in_python: bool) -> AnySelect:
    """`query` in log order with each row's group; the last `:limit` (newest first) or the page
    when the filter has them and nothing is left to Python (`pattern`)."""
    query = query.add_columns(statements.GROUP)
    if not in_python and filter.last_n is not None:
        return query.order_by(statements.GROUP.desc(), statements.ORDER_KEY.desc()).limit(statements.LIMIT)
    query = query.order_by(statements.GROUP, statements.ORDER_KEY)
    if not in_python and filter.page_size is not None:
        return query.offset(statements.OFFSET).limit(statements.LIMIT)
    return query
