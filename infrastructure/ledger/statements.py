"""The SQL the ledger runs, as SQLAlchemy Core expressions: one definition for PostgreSQL and
SQLite, each executed on a Core `Connection` or compiled once per dialect as a `DriverStatement`
(`driver.py`), never written twice for the two.

The window rule of `domain.window.WindowShape` in SQL: a window *prefix* in `window_slots` (by
ordinal), then every event row after the session's `window_base` that has no slot; rewound rows
have a slot marked `rewound`.
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.filters import EventFilter, MatchMode
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.ledger.schema import (
    AnySelect,
    access_tokens,
    app_states,
    ledger,
    sessions,
    user_states,
    window_slots,
)
from sessionledger.infrastructure.ledger.text_index import MATCHED_TEXT, like_term

EVENT = Kind.EVENT.value
STATS = (
    "window_events",
    "window_turns",
    "window_bytes",
    "window_tokens",
    "window_uncounted",
    "events_since_summary",
)
"""The `sessions` columns of the window stats, in `WindowStats` order."""


def _text_search(f: EventFilter, dialect: sa.Dialect) -> sa.ColumnElement[bool] | None:
    """`keyword` and `keywords` as one condition on the row's lowercased message text, extracted
    from the payload once per row whatever the number of terms; each term's LIKE pattern the bind
    parameter `kw` (`keyword`) or `kw_<n>` (`filter_values`).

    Written per term, `lower(payload text) LIKE ...` parses the whole payload again for every term
    (PostgreSQL keeps each copy until the row is done: 300 terms over one 1 MB event took 1.5 GB).
    The text therefore comes from a subquery with `OFFSET 0`, which neither PostgreSQL nor SQLite
    merges into the query around it (it would copy the expression back into every term).
    MariaDB and MySQL take no outer column into a subquery in FROM: there the expression is written
    per term, at most `MAX_KEYWORDS` + 1 of them (`domain.filters`).
    """
    if f.keyword is None and f.keywords is None:
        return None
    text: sa.ColumnElement[Any] = MATCHED_TEXT
    message = None
    if dialect.name != "mysql":
        once = sa.select(text.label("text")).correlate(ledger).offset(sa.literal_column("0"))
        message = once.subquery("message")
        text = message.c.text

    def contains(parameter: str) -> sa.ColumnElement[bool]:
        return text.like(sa.bindparam(parameter, type_=sa.Text), escape="\\")

    conditions = [] if f.keyword is None else [contains("kw")]
    if f.keywords is not None:
        found = [contains(f"kw_{n}") for n in range(len(f.keywords))]
        conditions.append(sa.and_(*found) if f.match_mode is MatchMode.ALL else sa.or_(*found))
    if message is None:
        return sa.and_(*conditions)
    return sa.select(sa.and_(*conditions)).select_from(message).scalar_subquery()


SLOT_OF_ROW = sa.and_(
    window_slots.c.session_id == ledger.c.session_id, window_slots.c.position == ledger.c.position
)
_SLOT_JOINED = ledger.outerjoin(window_slots, SLOT_OF_ROW)
IN_PREFIX = window_slots.c.ordinal.is_not(None)
NOT_REWOUND = sa.or_(window_slots.c.rewound.is_(None), window_slots.c.rewound == sa.false())
GROUP = sa.case((IN_PREFIX, 1), (ledger.c.position > sessions.c.window_base, 2), else_=0)
"""0 = archived (by position), 1 = the window prefix (by ordinal), 2 = the window tail (by position)."""
ORDER_KEY = sa.func.coalesce(window_slots.c.ordinal, ledger.c.position)
IN_WINDOW = sa.or_(IN_PREFIX, ledger.c.position > sessions.c.window_base)


SID = sa.bindparam("sid", type_=sa.Text)
LIVE_SESSION = sa.and_(sessions.c.id == SID, sessions.c.deleted_at.is_(None))
"""The session id parameter, and a live session's row by it."""

LIVE_EVENTS = (
    sa.select()
    .select_from(_SLOT_JOINED.join(sessions, sessions.c.id == ledger.c.session_id))
    .where(ledger.c.session_id == SID, sessions.c.deleted_at.is_(None), ledger.c.kind == EVENT, NOT_REWOUND)
)
"""Readable event rows of the live session `sid`, joined to what the window rule needs."""


def live_session_events(session_id: str) -> AnySelect:
    """`LIVE_EVENTS` of this session, its id bound in the statement."""
    return LIVE_EVENTS.params(sid=session_id)


def last_rows(query: AnySelect, archived: bool) -> AnySelect:
    """The last `:n` rows of `query` (a `LIVE_EVENTS` read) in `get_events()` order, adding each
    row's group.

    Each group's own last `n` rows (a backward range read of UNIQUE(session_id, position) from
    the end or from the window base, or the prefix by ordinal), then the last `n` of their union:
    the cost follows `n` and the window prefix, not the length of the history.
    """
    union = _each_group(query, archived, descending=True)
    return (
        sa.select(union.c.event_id, union.c.payload, union.c.grp)
        .order_by(union.c.grp.desc(), union.c.key.desc())
        .limit(COUNT)
    )


def page_rows(query: AnySelect, archived: bool) -> AnySelect:
    """Rows `:offset` to `:offset + :limit` of `query` (a `LIVE_EVENTS` read) in `get_events()`
    order, adding each row's group; `:n` is `offset + limit` (`page_values`).

    `last_rows` read forward: each group's first `offset + limit` matching rows (a forward range
    read that stops once it has them), then that page of their union. A filter most rows pass
    (a common keyword, none) costs what the page costs, whatever the length of the history; a
    rare keyword still reads until it has found the page or reached the end.
    """
    union = _each_group(query, archived, descending=False)
    return (
        sa.select(union.c.event_id, union.c.payload, union.c.grp)
        .order_by(union.c.grp, union.c.key)
        .offset(OFFSET)
        .limit(LIMIT)
    )


def page_values(offset: int, limit: int) -> dict[str, int]:
    """The parameters of a `page_rows` statement."""
    return {"n": offset + limit, "offset": offset, "limit": limit}


COUNT, OFFSET, LIMIT = (sa.bindparam(name, type_=sa.BigInteger) for name in ("n", "offset", "limit"))
"""How many rows each group of `last_rows` and `page_rows` reads, and the page they keep."""


def _each_group(query: AnySelect, archived: bool, descending: bool) -> sa.Subquery:
    """The union of each group's first (or last) `:n` rows of `query`, with columns `grp` and `key`."""
    base = sessions.alias("base")
    window_base = sa.select(base.c.window_base).where(base.c.id == SID).scalar_subquery()
    outside_prefix = window_slots.c.ordinal.is_(None)
    groups = [
        (2, sa.and_(outside_prefix, ledger.c.position > window_base), ledger.c.position),
        (1, IN_PREFIX, window_slots.c.ordinal),
    ]
    if archived:
        groups.append((0, sa.and_(outside_prefix, ledger.c.position <= window_base), ledger.c.position))
    parts = [
        query.add_columns(sa.literal_column(str(group), sa.Integer).label("grp"), key.label("key"))
        .where(where)
        .order_by(key.desc() if descending else key)
        .limit(COUNT)
        .subquery()
        for group, where, key in groups
    ]  # each part in a subquery: SQLite allows no ORDER BY/LIMIT on a UNION member itself
    return sa.union_all(*(sa.select(part) for part in parts)).subquery()


def filter_shape(f: EventFilter) -> tuple[object, ...]:
    """What of `f` decides the SQL of `criteria(f)`: filters of one shape share one statement,
    their values bound by `filter_values`."""
    return (
        f.exclude_synthetic,
        f.exclude_archived,
        f.start is not None,
        f.end is not None,
        f.message_types is not None,
        f.keyword is not None,
        None if f.keywords is None else (len(f.keywords), f.match_mode is MatchMode.ALL),
        f.branch is not None,
    )


def filter_values(f: EventFilter) -> dict[str, Any]:
    """The bind parameters of `criteria(f)`."""
    values: dict[str, Any] = {}
    if f.start is not None:
        values["start"] = f.start
    if f.end is not None:
        values["end"] = f.end
    if f.message_types is not None:
        values["types"] = sorted(t.value for t in f.message_types)
    if f.keyword is not None:
        values["kw"] = like_term(f.keyword)
    for n, term in enumerate(f.keywords or ()):
        values[f"kw_{n}"] = like_term(term)
    if f.branch is not None:
        values["branch"] = f.branch
    return values


def criteria(f: EventFilter, dialect: sa.Dialect) -> list[sa.ColumnElement[bool]]:
    """Every per-event criterion of the filter but `pattern`, as SQL for `dialect`, each value a
    bind parameter (`filter_values`): the SQL depends on `filter_shape(f)` alone."""
    where: list[sa.ColumnElement[bool]] = []
    if f.exclude_synthetic:
        where.append(ledger.c.synthetic == sa.false())
    if f.exclude_archived:
        where.append(IN_WINDOW)
    if f.start is not None:
        where.append(ledger.c.occurred_at >= sa.bindparam("start", type_=ledger.c.occurred_at.type))
    if f.end is not None:
        where.append(ledger.c.occurred_at <= sa.bindparam("end", type_=ledger.c.occurred_at.type))
    if f.message_types is not None:
        where.append(ledger.c.event_type.in_(sa.bindparam("types", expanding=True)))
    text_search = _text_search(f, dialect)
    if text_search is not None:
        where.append(text_search)
    if f.branch is not None:
        branch = sa.bindparam("branch", type_=sa.Text)
        ancestor = (
            sa.func.substr(branch, 1, sa.func.char_length(ledger.c.branch) + 1) == ledger.c.branch + "."
        )
        where.append(sa.or_(ledger.c.branch.is_(None), ledger.c.branch == branch, ancestor))
    return where


ROW_COLUMNS = (
    "session_id", "position", "version", "event_id", "kind", "occurred_at", "recorded_at", "event_type",
    "branch", "synthetic", "payload", "token_count", "content_hash", "prev_hash", "row_hash",
)  # fmt: skip
INSERT_ROW = ledger.insert().inline()
"""Ledger rows (`rows.ledger_row`); `inline`: nothing to fetch back, not even the global position."""


def taken_event_ids(session_ids: list[str], event_ids: list[str]) -> AnySelect:
    """`(session_id, event_id)` of the ledger rows with one of these event ids in one of these
    sessions: the ids `domain.write_plans` calls taken, read from UNIQUE(session_id, event_id)."""
    return sa.select(ledger.c.session_id, ledger.c.event_id).where(
        ledger.c.session_id.in_(session_ids), ledger.c.event_id.in_(event_ids)
    )


# The one-event append: moves the head only if nobody else did since it was cached.
ONE = sa.literal_column("1", sa.Integer)
TOKEN_LIVE = sa.exists().where(
    access_tokens.c.token_id == sa.bindparam("token_id", type_=access_tokens.c.token_id.type),
    access_tokens.c.revoked_at.is_(None),
)
"""The precondition of an append made for a remembered access token (the HTTP session API's:
`infrastructure.loop_appends`): the token is not revoked, checked by the append itself, atomically."""


def from_cached_head(session_id: str) -> tuple[sa.ColumnElement[bool], ...]:
    """Where an on-head append moves a session's head: the live session whose id is the parameter
    `session_id`, still at the cached head (the parameter `cached`)."""
    return (
        sessions.c.id == sa.bindparam(session_id),
        sessions.c.head_position == sa.bindparam("cached"),
        sessions.c.deleted_at.is_(None),
    )


def move_head(*preconditions: sa.ColumnElement[bool]) -> sa.Update:
    """The session row's head moved by one event, only from the cached head of a live session and
    where every one of `preconditions` holds: to the event's row, whose own parameters it binds
    (`session_id`, `position`, `row_hash`: `rows.ledger_row`'s), so that the append that inserts
    the row sends each value once (a procedure's call on MariaDB took 22 values, 3 of them twice)."""
    return (
        sessions.update()
        .where(*from_cached_head("session_id"), *preconditions)
        .values(
            version=sessions.c.version + ONE,
            head_position=sa.bindparam("position", type_=sa.BigInteger),
            head_hash=sa.bindparam("row_hash", type_=sa.Text),
            window_events=sessions.c.window_events + ONE,
            window_turns=sessions.c.window_turns + sa.bindparam("turn", type_=sa.Integer),
            window_bytes=sessions.c.window_bytes + sa.bindparam("size", type_=sa.BigInteger),
            window_uncounted=sessions.c.window_uncounted + ONE,
            events_since_summary=(sessions.c.events_since_summary + ONE)
            * sa.bindparam("keep_count", type_=sa.Integer),
        )
    )


@functools.cache  # one statement per argument: the drivers' compiled forms key on it
def append_row(head_moved: sa.Update) -> sa.Insert:
    """`WITH moved AS (UPDATE sessions ... RETURNING id) INSERT INTO ledger SELECT ... FROM moved`:
    the row is inserted exactly when `head_moved` (a `move_head`) moved the head (PostgreSQL only;
    SQLite has no DML in WITH)."""
    moved = head_moved.returning(sessions.c.id).cte("moved")
    return (
        ledger.insert()
        .from_select(
            list(ROW_COLUMNS),
            sa.select(
                *(
                    sa.cast(sa.bindparam(name), ledger.c[name].type)
                    if name == "payload"
                    else sa.bindparam(name, type_=ledger.c[name].type)
                    for name in ROW_COLUMNS
                )
            ).select_from(moved),
        )
        .add_cte(moved)
    )


MOVE_HEAD = move_head()
APPEND_ROW = append_row(MOVE_HEAD)

# One session's rows from its cached head in one round trip (adapters' appends): one statement on
# PostgreSQL (`append_rows`), one packet on MariaDB/MySQL (`MOVE_BY`, `insert_rows_if_moved`).
ON_HEAD_ROWS = 32
"""The most rows `append_rows` writes: one statement per row count is prepared on each connection."""
VALUED = tuple(name for name in ROW_COLUMNS if name not in ("session_id", "token_count"))
"""The row columns `append_rows` takes, one parameter `<column>_<row>` each (`row_parameters`)."""
ADDED = tuple((name, f"add_{name}") for name in STATS)
"""Each window stat and the `append_rows` parameter that adds to it."""


def row_parameters(count: int) -> tuple[tuple[int, str, str], ...]:
    """`append_rows(count)`'s row parameters: `(row, column, parameter)` each, named once here (an
    adapter's append fills them on every put)."""
    return tuple((n, name, f"{name}_{n}") for n in range(count) for name in VALUED)


MOVE_BY = (
    sessions.update()
    .where(*from_cached_head("sid"))
    .values(
        version=sa.bindparam("new_version", type_=sa.BigInteger),
        head_position=sa.bindparam("new_position", type_=sa.BigInteger),
        head_hash=sa.bindparam("new_hash", type_=sa.Text),
        **{name: sessions.c[name] + sa.bindparam(added, type_=sa.BigInteger) for name, added in ADDED},
    )
)
"""A session's head moved from the cached position past several rows, its window stats growing
by the `add_<stat>` deltas: `append_rows`' head move."""
_MOVED_BY = MOVE_BY.returning(sessions.c.id).cte("moved_by")


def _valued_type(name: str) -> Any:
    """A row value's type: its column's, but text for the payload (its canonical text, cast once)."""
    return sa.Text() if name == "payload" else ledger.c[name].type


@functools.cache  # one statement per argument: the drivers' compiled forms key on it
def append_rows(count: int) -> sa.Insert:
    """`WITH moved_by AS (UPDATE sessions ... RETURNING id) INSERT INTO ledger SELECT ... FROM
    moved_by JOIN (VALUES ...) AS v`: a session's `count` rows go in exactly when its head moved
    from the cached position, its window stats growing by the `add_<stat>` deltas (PostgreSQL
    only: `APPEND_ROW` for several rows, each value a parameter of its own, as the server reads
    them fastest: an `unnest` of arrays cost a third more)."""
    bound: list[list[sa.BindParameter[Any]]] = [[] for _ in range(count)]
    for n, name, parameter in row_parameters(count):
        bound[n].append(sa.bindparam(parameter, type_=_valued_type(name)))
    rows = sa.values(*(sa.column(name, _valued_type(name)) for name in VALUED), name="v").data(
        [tuple(row) for row in bound]
    )
    return (
        ledger.insert()
        .from_select(
            ["session_id", *VALUED],
            sa.select(
                _MOVED_BY.c.id,
                *(
                    sa.cast(rows.c[name], ledger.c.payload.type) if name == "payload" else rows.c[name]
                    for name in VALUED
                ),
            )
            .select_from(_MOVED_BY)
            .join(rows, sa.true()),
        )
        .add_cte(_MOVED_BY)
    )


@functools.cache  # one statement per argument: the drivers' compiled forms key on it
def insert_rows_if_moved(count: int) -> sa.Insert:
    """`INSERT INTO ledger SELECT ... FROM (SELECT ... UNION ALL SELECT ...) AS v WHERE
    ROW_COUNT() = 1`: after `MOVE_BY` in the same packet (`driver.Packet`), the `count` rows of
    `append_rows` go in exactly when the head moved (MariaDB/MySQL, which have no DML in WITH;
    `ROW_COUNT()` is the previous statement's while the INSERT runs, so it gates every row alike)."""
    bound: list[list[sa.Label[Any]]] = [[] for _ in range(count)]
    for n, name, parameter in row_parameters(count):
        bound[n].append(sa.bindparam(parameter, type_=ledger.c[name].type).label(name))
    rows = sa.union_all(*(sa.select(*row) for row in bound)).subquery("v")
    return ledger.insert().from_select(
        ["session_id", *VALUED],
        sa.select(sa.bindparam("sid", type_=sa.Text), *(rows.c[name] for name in VALUED)).where(
            sa.func.row_count() == ONE
        ),
    )


def _moved_head(**values: Any) -> sa.Update:
    """The session row's new head (version, position, hash) and window stats, with `values`."""
    return (
        sessions.update()
        .where(sessions.c.id == SID)
        .values(
            version=sa.bindparam("new_version", type_=sa.BigInteger),
            head_position=sa.bindparam("new_position", type_=sa.BigInteger),
            head_hash=sa.bindparam("new_hash", type_=sa.Text),
            **{name: sa.bindparam(f"new_{name}", type_=sessions.c[name].type) for name in STATS},
            **values,
        )
    )


LOCK_BATCH_SESSIONS = (
    sa.select(
        sessions.c.id,
        sessions.c.app_name,
        sessions.c.user_id,
        sessions.c.state,
        sessions.c.version,
        sessions.c.head_position,
        sessions.c.head_hash,
        *(sessions.c[name] for name in STATS),
    )
    .where(sessions.c.id.in_(sa.bindparam("sids", expanding=True)), sessions.c.deleted_at.is_(None))
    .order_by(sessions.c.id)
    .with_for_update()
)
"""What a batch append reads of each of its live sessions `:sids`, under their row locks taken in
id order (`BatchSession`)."""

BATCH_HEADS = _moved_head(state=sa.bindparam("new_state", type_=sessions.c.state.type))
"""A batch's new head, session state and window stats of one session (run as an executemany)."""


HEAD = sa.select(
    sessions.c.head_position, sessions.c.head_hash, sessions.c.version, sessions.c.window_epoch
).where(LIVE_SESSION)
"""A live session's chain head and window epoch."""
LOCK_HEAD = HEAD.with_for_update()
"""`HEAD` under the session row lock, which every write to a session takes (appends included)."""
HEAD_COLUMNS = (
    sessions.c.version,
    sessions.c.window_epoch,
    sessions.c.window_base,
    *(sessions.c[name] for name in STATS),
)
WINDOW_HEAD = sa.select(*HEAD_COLUMNS).where(LIVE_SESSION)
"""A live session's version, window epoch, window base and window stats."""


def _window(*columns: sa.ColumnElement[Any]) -> sa.CompoundSelect[*tuple[Any, ...]]:
    """The active window (`domain.window.WindowShape`) of a session, rows `(part, part_order,
    *columns)`: the prefix (`part` 1, by `part_order` = ordinal), then the tail (`part` 2, by
    `part_order` = position), event rows after the base with no slot. Unordered: the caller sorts,
    as sorting 1,000 rows of payloads cost the server more than reading them."""

    def part(number: int, order: sa.ColumnElement[Any]) -> AnySelect:
        return sa.select(
            sa.literal_column(str(number), sa.Integer).label("part"), order.label("part_order"), *columns
        ).where(LIVE_SESSION, ledger.c.session_id == SID, ledger.c.kind == EVENT)

    return sa.union_all(
        part(1, window_slots.c.ordinal)
        .select_from(
            sessions.join(window_slots, window_slots.c.session_id == sessions.c.id).join(ledger, SLOT_OF_ROW)
        )
        .where(IN_PREFIX, window_slots.c.rewound == sa.false()),
        part(2, ledger.c.position)
        .select_from(sessions.join(ledger, ledger.c.session_id == sessions.c.id))
        .where(
            ledger.c.position > sessions.c.window_base,
            ~sa.exists().where(SLOT_OF_ROW, sa.or_(IN_PREFIX, window_slots.c.rewound)),
        ),
    )


WINDOW = _window(*HEAD_COLUMNS, ledger.c.event_id, ledger.c.payload, ledger.c.position, ledger.c.token_count)
"""The active window with the session's head columns on every row (one statement: one snapshot)."""

WINDOW_PAYLOADS = _window(ledger.c.payload)
"""The active window's payloads alone: a history read (`get_messages`, an adapter's items) needs
no head, and a row without the head's columns is about a quarter cheaper to send and read."""

TAIL_AFTER = (
    sa.select(ledger.c.event_id, ledger.c.payload, ledger.c.token_count)
    .select_from(ledger.outerjoin(window_slots, SLOT_OF_ROW))
    .where(
        ledger.c.session_id == SID,
        ledger.c.kind == EVENT,
        ledger.c.position > sa.bindparam("after", type_=sa.BigInteger),
        window_slots.c.ordinal.is_(None),
        NOT_REWOUND,
    )
    .order_by(ledger.c.position)
)
"""The window's tail after a position: events appended since a compaction's read."""

CLEAR_PREFIX = window_slots.delete().where(window_slots.c.session_id == SID, IN_PREFIX)
INSERT_SLOT = window_slots.insert()
COMPACTED = _moved_head(
    window_base=sa.bindparam("new_base", type_=sa.BigInteger), window_epoch=sessions.c.window_epoch + ONE
)
"""A compaction's new head, window base, epoch and window stats."""


SESSIONS = (
    sa.select(sessions, app_states.c.state.label("app_state"), user_states.c.state.label("user_state"))
    .select_from(
        sessions.outerjoin(app_states, app_states.c.app_name == sessions.c.app_name).outerjoin(
            user_states,
            sa.and_(
                user_states.c.app_name == sessions.c.app_name, user_states.c.user_id == sessions.c.user_id
            ),
        )
    )
    .where(sessions.c.deleted_at.is_(None))
)
"""Live session rows with their app and user state, as `Session`s are built from them."""
