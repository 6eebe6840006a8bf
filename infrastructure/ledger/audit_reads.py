"""What audit and the relay read: a session's every record (`records.py`, on the driver in one
snapshot: sessions of 100,000 records, where per-row cost is the whole cost), every session id,
the global tail, and what `verify --since` asks of the digest's sessions. The session ids and the
tail are one query each on a Core `Connection`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, NamedTuple

import sqlalchemy as sa
from sessionledger.domain.records import LedgerRecord, TailRow
from sessionledger.infrastructure.ledger.driver import driver_of
from sessionledger.infrastructure.ledger.records import CHUNK, read_records, snapshot
from sessionledger.infrastructure.ledger.schema import AnySelect, ledger, sessions


class AuditReads:
    """The whole-ledger reads of one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine

    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        with snapshot(self._engine) as conn:
            return iter([record for record, _ in read_records(conn, session_id)])

    def session_ids(self) -> list[str]:
        """Every session row by creation, then any session with ledger records but no session row
        (only a hand-deleted row does that), so a full `verify` still finds those records."""
        orphaned = (
            sa.select(ledger.c.session_id)
            .where(~sa.exists().where(sessions.c.id == ledger.c.session_id))
            .distinct()
            .order_by(ledger.c.session_id)
        )
        with self._engine.connect() as conn:
            known = conn.execute(sa.select(sessions.c.id).order_by(sessions.c.created_at, sessions.c.id))
            return [*known.scalars(), *conn.execute(orphaned).scalars()]

    def tail(self, after: int, limit: int) -> list[TailRow]:
        query = (
            sa.select(ledger.c.global_position, ledger.c.session_id, sessions.c.app_name, ledger.c.kind)
            .join(sessions, sessions.c.id == ledger.c.session_id)
            .where(ledger.c.global_position > after)
            .order_by(ledger.c.global_position)
            .limit(limit)
        )
        with self._engine.connect() as conn:
            return [
                TailRow(row.global_position, row.session_id, row.app_name, row.kind)
                for row in conn.execute(query)
            ]


# --- verify --since ---------------------------------------------------------------------------


class Trusted(NamedTuple):
    """The heads a trusted digest saw, as columns (one entry per session, in the same order): the
    sessions, each head's position and row hash, and its global position (`None`: not recorded, a
    digest of an older release). Columns, because that is what a statement binds them as."""

    sids: Sequence[str]
    positions: Sequence[int]
    heads: Sequence[str]
    globals: Sequence[int | None]


class Moved(NamedTuple):
    """A session whose record at a trusted head, or whose session row, is not that head any more:
    the row hash now at the head's position (`None`: no record there), and the head the session
    row names (`None`: no session row)."""

    row_hash: str | None
    head: tuple[int, str] | None


def _moved_query(wanted: Any) -> AnySelect:
    """The trusted heads (`wanted`: sid, pos, head, gp) whose ledger row or session row differs.

    A head is found by its global position, the primary key, and is as trusted when the row there
    is that session's record at that position with that hash: by UNIQUE(session_id, position) it
    is then the row the session holds at the position. Only a head not found so (moved, or its
    global position unknown or not the row's) is looked up by session and position, to say what
    is there now; so a wrong global position costs a lookup, never a finding."""
    at_gp = ledger.alias("at_gp")
    by_position = ledger.alias("by_position")
    found = sa.and_(
        at_gp.c.session_id == wanted.c.sid,
        at_gp.c.position == wanted.c.pos,
        at_gp.c.row_hash == wanted.c.head,
    )
    now = sa.case(
        (found, wanted.c.head),
        else_=sa.select(by_position.c.row_hash)
        .where(by_position.c.session_id == wanted.c.sid, by_position.c.position == wanted.c.pos)
        .scalar_subquery(),
    )
    heads = (
        sa.select(wanted.c.sid, wanted.c.pos, wanted.c.head, now.label("now"))
        .select_from(wanted.outerjoin(at_gp, at_gp.c.global_position == wanted.c.gp))
        .subquery("heads")
    )
    return (
        sa.select(heads.c.sid, heads.c.now, sessions.c.id, sessions.c.head_position, sessions.c.head_hash)
        .select_from(heads.outerjoin(sessions, sessions.c.id == heads.c.sid))
        .where(
            sa.or_(
                heads.c.now.is_distinct_from(heads.c.head),
                sessions.c.head_position.is_distinct_from(heads.c.pos),
                sessions.c.head_hash.is_distinct_from(heads.c.head),
            )
        )
    )


_WANTED_COLUMNS = (
    sa.column("sid", sa.Text),
    sa.column("pos", sa.BigInteger),
    sa.column("head", sa.Text),
    sa.column("gp", sa.BigInteger),
)
_ARRAYS = (("sids", sa.Text), ("positions", sa.BigInteger), ("heads", sa.Text), ("globals", sa.BigInteger))
_MOVED_POSTGRES = _moved_query(
    sa.func.unnest(*(sa.cast(sa.bindparam(name), sa.ARRAY(type_)) for name, type_ in _ARRAYS))
    .table_valued(*_WANTED_COLUMNS)
    .render_derived(name="wanted")
)


@cache
def _moved_sql(dialect: sa.Dialect) -> str:
    """`_MOVED_POSTGRES` for psycopg, its arrays bound as array literals (`_text_array`)."""
    sql = _MOVED_POSTGRES.compile(dialect=dialect).string
    for name, _ in _ARRAYS:
        sql = sql.replace(f"%({name})s", "%s")
    return sql


def _text_array(values: Sequence[str]) -> str:
    """A PostgreSQL text array literal, built by a few string operations over all the values: the
    driver's own array adapters make a Python call per element, which costs the client more than
    the lookups cost the server. Each value is quoted, its `"` and `\\` escaped; a NUL, which
    PostgreSQL text cannot hold, separates them while they are escaped."""
    joined = "\x00".join(values)
    if joined.count("\x00") != max(len(values) - 1, 0):
        raise ValueError("a session id or hash holds a NUL character (\\x00), which PostgreSQL cannot store")
    escaped = joined.replace("\\", "\\\\").replace('"', '\\"').replace("\x00", '","')
    return '{"' + escaped + '"}' if values else "{}"


def _number_array(values: Sequence[int | None]) -> str:
    """A PostgreSQL bigint array literal (`None`: NULL), as `_text_array`."""
    texts = (
        ("NULL" if value is None else str(value) for value in values) if None in values else map(str, values)
    )
    return "{" + ",".join(texts) + "}"


_SESSION_HEADS = sa.select(sessions.c.id, sessions.c.head_position, sessions.c.head_hash)
_TOUCHED = _SESSION_HEADS.where(sessions.c.id.in_(sa.bindparam("sids", expanding=True)))
_TOUCHED_POSTGRES = _SESSION_HEADS.where(
    sessions.c.id == sa.func.any(sa.cast(sa.bindparam("sids"), sa.ARRAY(sa.Text)))
)


def moved_heads(conn: sa.Connection, trusted: Trusted) -> dict[str, Moved]:
    """Of the trusted heads, those whose ledger row at that position or whose session row's head
    is not that head any more. Whatever is as trusted comes back as nothing, so the caller's work
    follows the sessions that changed; the database's follows the heads (a primary-key lookup
    each, in a statement per `CHUNK` heads). PostgreSQL asks the same in one statement over four
    arrays (`_send_moved`, from `heads_sent`)."""
    rows: list[Sequence[Any]] = []
    heads = list(zip(*trusted, strict=True))
    for start in range(0, len(heads), CHUNK):
        wanted = sa.values(*_WANTED_COLUMNS, name="wanted").data(heads[start : start + CHUNK]).cte()
        rows += conn.execute(_moved_query(wanted)).all()
    return _moved_rows(rows)


def _send_moved(driver: Any, dialect: sa.Dialect, trusted: Trusted) -> Any:
    """`moved_heads`' statement executed on a psycopg connection (`None`: no heads to look up)."""
    if not trusted.sids:
        return None
    cursor = driver.cursor()
    cursor.execute(
        _moved_sql(dialect),
        [
            _text_array(trusted.sids),
            _number_array(trusted.positions),
            _text_array(trusted.heads),
            _number_array(trusted.globals),
        ],
    )
    return cursor


def _moved_rows(rows: Iterable[Sequence[Any]]) -> dict[str, Moved]:
    return {
        sid: Moved(row_hash, None if row_id is None else (head_position, head_hash))
        for sid, row_hash, row_id, head_position, head_hash in rows
    }


@cache
def _touched_sql(dialect: sa.Dialect) -> str:
    """`_TOUCHED_POSTGRES` for psycopg, its array bound as an array literal (`_text_array`)."""
    return _TOUCHED_POSTGRES.compile(dialect=dialect).string.replace("%(sids)s", "%s")


def touched_heads(conn: sa.Connection, session_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
    """The head (position, row hash) the session row names, of each of the sessions (those written
    to since: the caller has their records; a lookup each, in a statement per `CHUNK`)."""
    found: dict[str, tuple[int, str]] = {}
    for start in range(0, len(session_ids), CHUNK):
        rows = conn.execute(_TOUCHED, {"sids": list(session_ids[start : start + CHUNK])})
        found.update((row.id, (row.head_position, row.head_hash)) for row in rows)
    return found


Heads = tuple[dict[str, Moved], dict[str, tuple[int, str]]]
"""The moved heads (`moved_heads`) and the heads of the sessions written to since (`touched_heads`)."""


@contextmanager
def heads_sent(
    conn: sa.Connection, trusted: Trusted, written: Sequence[str]
) -> Iterator[Callable[[], Heads]]:
    """`moved_heads(trusted)` and `touched_heads(written)` in `conn`'s transaction, asked on entry
    and collected by calling what this yields. On PostgreSQL both are sent in pipeline mode and
    answered by the database while the caller's Python works through rows it has already read on
    `conn` (so enter this after that read): the lookups cost no wall time while there is work
    here to hide them behind, and no second connection or snapshot export is needed for them to
    see the same snapshot. SQLite has nothing to overlap: both are read on entry."""
    if conn.dialect.name != "postgresql":
        found = moved_heads(conn, trusted), touched_heads(conn, written)
        yield lambda: found
        return
    driver = driver_of(conn.connection)
    with driver.pipeline():
        moved = _send_moved(driver, conn.dialect, trusted)
        touched = driver.cursor()
        touched.execute(_touched_sql(conn.dialect), [_text_array(written)])

        def collected() -> Heads:
            return _moved_rows([] if moved is None else moved.fetchall()), {
                sid: (position, hash_) for sid, position, hash_ in touched.fetchall()
            }

        yield collected


def last_positions(conn: sa.Connection, session_ids: Iterable[str]) -> dict[str, int]:
    """The last position each session still has records up to (none: no records)."""
    query = (
        sa.select(ledger.c.session_id, sa.func.max(ledger.c.position))
        .where(ledger.c.session_id.in_(list(session_ids)))
        .group_by(ledger.c.session_id)
    )
    return {str(sid): int(last) for sid, last in conn.execute(query)}
