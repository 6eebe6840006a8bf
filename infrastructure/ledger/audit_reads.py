"""What audit and the relay read: the SQL side of the audit port (`domain.audit_port`), every
session id and the global tail.

A snapshot (`SqlAuditSnapshot`) is one read transaction (`records.snapshot`). A session's records
are read on the driver (`records.py`: sessions of 100,000 records, where per-row cost is the whole
cost), their stored payload text hashed as it is: the canonical text the ledger hashed when it wrote
the row (PostgreSQL `json` and SQLite text keep it byte for byte), so a match proves the content
without re-serializing it. What `verify --since` asks of a digest's heads is one statement, sent
in pipeline mode on PostgreSQL (`heads_sent`). The session ids, the session rows and the tail are
one query each on a Core `Connection`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.audit_port import (
    END,
    Heads,
    Moved,
    RowHash,
    SessionRecords,
    StoredSession,
    Trusted,
)
from sessionledger.domain.records import LedgerRecord, TailRow
from sessionledger.domain.window import WindowStats
from sessionledger.infrastructure.ledger.driver import driver_of
from sessionledger.infrastructure.ledger.records import CHUNK, read_appended, read_records, snapshot
from sessionledger.infrastructure.ledger.schema import AnySelect, ledger, sessions, window_slots

_FEW = 1_000
"""Sessions whose rows are read by their ids (one statement, a parameter each); more: every row."""

_FIRST_READ = sa.select(ledger.c.global_position).limit(1)
"""A read of the ledger table, one row: what fixes a read transaction's snapshot."""


class AuditReads:
    """The whole-ledger reads of one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine

    @contextmanager
    def snapshot(self) -> Iterator[SqlAuditSnapshot]:
        """A snapshot taken on entry: its first read is made here, since the database takes a
        transaction's snapshot at its first read, not at its start."""
        with snapshot(self._engine) as conn:
            conn.execute(_FIRST_READ)
            yield SqlAuditSnapshot(conn)

    def after_fork(self) -> None:
        """Drop the pooled connections a forked process inherited without closing them (they are
        the parent's): the child reads through the engine's fresh pool."""
        self._engine.dispose(close=False)

    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        with snapshot(self._engine) as conn:
            return iter([record for record, _ in read_records(conn, session_id)])

    def session_ids(self) -> list[str]:
        with self._engine.connect() as conn:
            return _session_ids(conn)

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


def _session_ids(conn: sa.Connection) -> list[str]:
    """Every session row by creation, then any session with ledger records but no session row
    (only a hand-deleted row does that), so a full `verify` still finds those records."""
    orphaned = (
        sa.select(ledger.c.session_id)
        .where(~sa.exists().where(sessions.c.id == ledger.c.session_id))
        .distinct()
        .order_by(ledger.c.session_id)
    )
    known = conn.execute(sa.select(sessions.c.id).order_by(sessions.c.created_at, sessions.c.id))
    return [*known.scalars(), *conn.execute(orphaned).scalars()]


class SqlAuditSnapshot:
    """`domain.audit_port.AuditSnapshot` in one read transaction (`conn`)."""

    def __init__(self, conn: sa.Connection) -> None:
        self._conn = conn

    def session_ids(self) -> list[str]:
        return _session_ids(self._conn)

    def stored(self, session_ids: Sequence[str] | None = None) -> Iterator[StoredSession]:
        """A few sessions' rows and slots by their ids, else (none given, or too many ids for one
        statement) every row and slot, those not asked for left out."""
        rows, slots = (
            sa.select(sessions),
            sa.select(
                window_slots.c.session_id,
                window_slots.c.position,
                window_slots.c.ordinal,
                window_slots.c.rewound,
            ),
        )
        if session_ids is not None and len(session_ids) <= _FEW:
            rows = rows.where(sessions.c.id.in_(session_ids))
            slots = slots.where(window_slots.c.session_id.in_(session_ids))
        wanted = None if session_ids is None else set(session_ids)
        found = {row.id: row for row in self._conn.execute(rows) if wanted is None or row.id in wanted}
        prefixes: dict[str, list[tuple[int, int]]] = {}
        hidden: dict[str, set[int]] = {}
        for session_id, position, ordinal, rewound in self._conn.execute(slots):
            if session_id in found:
                if ordinal is not None:
                    prefixes.setdefault(session_id, []).append((ordinal, position))
                if rewound:
                    hidden.setdefault(session_id, set()).add(position)
        for session_id, row in found.items():
            yield _stored_session(
                row,
                tuple(position for _, position in sorted(prefixes.get(session_id, ()))),
                frozenset(hidden.get(session_id, ())),
            )

    def records(self, session_id: str, after: int = 0, upto: int = END) -> SessionRecords:
        sha256 = hashlib.sha256
        records: list[LedgerRecord] = []
        digests: list[str | None] = []
        for record, text in read_records(self._conn, session_id, after, upto):
            records.append(record)
            digests.append(None if text is None else sha256(text).hexdigest())
        return SessionRecords(records, digests)

    def top(self) -> int:
        return self._conn.execute(sa.select(sa.func.max(ledger.c.global_position))).scalar() or 0

    def row_hashes(self) -> Iterable[RowHash]:
        query = sa.select(ledger.c.session_id, ledger.c.row_hash, ledger.c.global_position).order_by(
            ledger.c.session_id, ledger.c.position
        )
        rows = self._conn.execution_options(yield_per=10_000).execute(query)
        return rows  # type: ignore[return-value]  # each row is (session_id, row_hash, global_position)

    def appended(self, after: int) -> tuple[list[str], Iterator[tuple[str, SessionRecords]]]:
        written, appended = read_appended(self._conn, after)
        sha256 = hashlib.sha256

        def hashed() -> Iterator[tuple[str, SessionRecords]]:
            for session_id, pairs in appended:
                digests = [None if text is None else sha256(text).hexdigest() for _, text in pairs]
                yield session_id, SessionRecords([record for record, _ in pairs], digests)

        return written, hashed()

    def heads_sent(
        self, trusted: Trusted, written: Sequence[str]
    ) -> AbstractContextManager[Callable[[], Heads]]:
        return heads_sent(self._conn, trusted, written)

    def last_positions(self, session_ids: Iterable[str]) -> dict[str, int]:
        return last_positions(self._conn, session_ids)


def _stored_session(row: Any, prefix: tuple[int, ...], hidden: frozenset[int]) -> StoredSession:
    return StoredSession(
        session_id=row.id,
        version=row.version,
        head=(row.head_position, row.head_hash),
        deleted=row.deleted_at is not None,
        user_id=row.user_id,
        app_name=row.app_name,
        metadata=row.metadata,
        created_at=row.created_at,
        expires_at=row.expires_at,
        state=row.state,
        window_base=row.window_base,
        prefix=prefix,
        hidden=hidden,
        stats=WindowStats(
            row.window_events,
            row.window_turns,
            row.window_bytes,
            row.window_tokens,
            row.window_uncounted,
            row.events_since_summary,
        ),
    )


# --- verify --since ---------------------------------------------------------------------------


def _moved_query(wanted: Any) -> AnySelect:
    """The trusted heads (`wanted`: sid, pos, head, gp) whose ledger row or session row differs.

    A head is found by its session and global position (the primary key, on a partitioned ledger
    too, where it prunes the lookup to the session's partition), and is as trusted when the row there
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
        .select_from(
            wanted.outerjoin(
                at_gp, sa.and_(at_gp.c.session_id == wanted.c.sid, at_gp.c.global_position == wanted.c.gp)
            )
        )
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
