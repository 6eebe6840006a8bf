"""What audit and the relay read: a session's every record (`records.py`, on the driver in one
snapshot: sessions of 100,000 records, where per-row cost is the whole cost), every session id,
the global tail, and what `verify --since` asks of the digest's sessions. The session ids and the
tail are one query each on a Core `Connection`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, NamedTuple

import sqlalchemy as sa
from sessionledger.domain.ledger import LedgerRecord
from sessionledger.domain.ports import TailRow
from sessionledger.infrastructure.ledger.driver import driver_of
from sessionledger.infrastructure.ledger.records import CHUNK, read_records, snapshot
from sessionledger.infrastructure.ledger.schema import ledger, sessions
from sqlalchemy.dialects import postgresql


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

_SNAPSHOT_ID = re.compile(r"[0-9A-F]+(-[0-9A-F]+)+")


class Moved(NamedTuple):
    """A session whose record at a trusted head, or whose session row, is not that head any more:
    the row hash now at the head's position (`None`: no record there), and the head the session
    row names (`None`: no session row)."""

    row_hash: str | None
    head: tuple[int, str] | None


def _moved_query(wanted: Any) -> sa.Select:
    """The trusted heads (`wanted`: sid, pos, head) whose ledger row or session row differs."""
    return (
        sa.select(
            wanted.c.sid, ledger.c.row_hash, sessions.c.id, sessions.c.head_position, sessions.c.head_hash
        )
        .select_from(
            wanted.outerjoin(
                ledger, sa.and_(ledger.c.session_id == wanted.c.sid, ledger.c.position == wanted.c.pos)
            ).outerjoin(sessions, sessions.c.id == wanted.c.sid)
        )
        .where(
            sa.or_(
                ledger.c.row_hash.is_distinct_from(wanted.c.head),
                sessions.c.head_position.is_distinct_from(wanted.c.pos),
                sessions.c.head_hash.is_distinct_from(wanted.c.head),
            )
        )
    )


_WANTED_COLUMNS = (sa.column("sid", sa.Text), sa.column("pos", sa.BigInteger), sa.column("head", sa.Text))
_MOVED_POSTGRES = _moved_query(
    sa.func.unnest(
        sa.cast(sa.bindparam("sids"), postgresql.ARRAY(sa.Text)),
        sa.cast(sa.bindparam("positions"), postgresql.ARRAY(sa.BigInteger)),
        sa.cast(sa.bindparam("heads"), postgresql.ARRAY(sa.Text)),
    )
    .table_valued(*_WANTED_COLUMNS)
    .render_derived(name="wanted")
)


@cache
def _moved_sql(dialect: sa.Dialect) -> str:
    """`_MOVED_POSTGRES` for psycopg, its arrays bound in the binary protocol (`%b`): a text array
    bound as text costs a quoting pass over every element, twice the time of the lookups."""
    sql = _MOVED_POSTGRES.compile(dialect=dialect).string
    for name in ("sids", "positions", "heads"):  # in the order they come in the text
        sql = sql.replace(f"%({name})s", "%b")
    return sql


_TOUCHED = sa.select(sessions.c.id, sessions.c.head_position, sessions.c.head_hash).where(
    sessions.c.id.in_(sa.select(ledger.c.session_id).where(ledger.c.global_position > sa.bindparam("after")))
)


def moved_heads(conn: sa.Connection, trusted: Sequence[tuple[str, int, str]]) -> dict[str, Moved]:
    """Of the trusted `(session id, position, row hash)` heads, those whose ledger row at that
    position or whose session row's head is not that head any more. Whatever is as trusted comes
    back as nothing, so the caller's work follows the sessions that changed; the database's
    follows the heads (an index lookup each, in a statement per `CHUNK` heads). PostgreSQL asks
    the same in one statement over three arrays (`_send_moved`, from `heads_beside`)."""
    rows: list[Sequence[Any]] = []
    for start in range(0, len(trusted), CHUNK):
        wanted = sa.values(*_WANTED_COLUMNS, name="wanted").data(trusted[start : start + CHUNK]).cte()
        rows += conn.execute(_moved_query(wanted)).all()
    return _moved_rows(rows)


def _send_moved(driver: Any, dialect: sa.Dialect, trusted: Sequence[tuple[str, int, str]]) -> Any:
    """`moved_heads`' statement executed on a psycopg connection (`None`: no heads to look up);
    its rows are the cursor's (three arrays: no plan per head)."""
    if not trusted:
        return None
    cursor = driver.cursor(binary=True)
    cursor.execute(_moved_sql(dialect), [list(column) for column in zip(*trusted, strict=True)])
    return cursor


def _moved_rows(rows: Iterable[Sequence[Any]]) -> dict[str, Moved]:
    return {
        sid: Moved(row_hash, None if row_id is None else (head_position, head_hash))
        for sid, row_hash, row_id, head_position, head_hash in rows
    }


@cache
def _touched_sql(dialect: sa.Dialect) -> str:
    return _TOUCHED.compile(dialect=dialect).string


def touched_heads(conn: sa.Connection, after: int) -> dict[str, tuple[int, str]]:
    """The head (position, row hash) each session row names, for the sessions with records after
    global position `after`."""
    rows = conn.execute(_TOUCHED, {"after": after})
    return {row.id: (row.head_position, row.head_hash) for row in rows}


Heads = tuple[dict[str, Moved], dict[str, tuple[int, str]]]
"""The moved heads (`moved_heads`) and the heads of the sessions written to since (`touched_heads`)."""


@contextmanager
def heads_beside(
    engine: sa.Engine, conn: sa.Connection, trusted: Sequence[tuple[str, int, str]], after: int
) -> Iterator[Callable[[], Heads]]:
    """`moved_heads(trusted)` and `touched_heads(after)` as `conn`'s transaction sees them (it
    begins here), asked on entry and collected by calling what this yields. On PostgreSQL the
    snapshot is exported to a second connection, which sends both statements in pipeline mode and
    is answered by the database while the caller's Python works through its own rows on `conn`
    (one thread: nothing waits for the interpreter's lock). SQLite has nothing to export and one
    reader per connection: both are read on `conn`, on entry."""
    if conn.dialect.name != "postgresql":
        found = moved_heads(conn, trusted), touched_heads(conn, after)
        yield lambda: found
        return
    exported = str(conn.execute(sa.text("SELECT pg_export_snapshot()")).scalar_one())
    if not _SNAPSHOT_ID.fullmatch(exported):  # it is spelled into the statement below
        raise RuntimeError(f"unexpected snapshot id {exported!r}")
    with snapshot(engine) as other:
        driver = driver_of(other.connection)
        with driver.pipeline():
            driver.execute(f"SET TRANSACTION SNAPSHOT '{exported}'")
            moved = _send_moved(driver, other.dialect, trusted)
            touched = driver.cursor()
            touched.execute(_touched_sql(other.dialect), {"after": after})

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
