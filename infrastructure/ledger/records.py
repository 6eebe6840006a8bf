"""Reading every record of a session, fast: audit (verify, replay, export) reads whole sessions of
100,000 records and more, where per-row overhead is the whole cost.

Rows come straight off the driver in chunks of `CHUNK` positions (a range read of
UNIQUE(session_id, position), sorted here: the planner never sorts, see `_CHUNK_QUERY`), each chunk
fetched by a helper thread while the caller works through the one before, so the database and
Python work at the same time.
On PostgreSQL the binary protocol is used and a payload arrives as the bytes of its stored text:
the canonical text the ledger hashed, handed out as it is (audit hashes it) and parsed once by
orjson. The other columns still go through SQLAlchemy's own result conversions (`DriverStatement`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from itertools import groupby
from operator import attrgetter, itemgetter
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.infrastructure.ledger.driver import compiled, driver_of
from sessionledger.infrastructure.ledger.schema import ledger, loads

CHUNK = 5_000
"""Rows per round trip: large enough to amortize it, small enough to keep memory flat."""

_COLUMNS = (
    ledger.c.position,
    ledger.c.version,
    ledger.c.kind,
    ledger.c.event_id,
    ledger.c.occurred_at,
    ledger.c.recorded_at,
    ledger.c.event_type,
    ledger.c.branch,
    ledger.c.synthetic,
    sa.type_coerce(ledger.c.payload, sa.Text),  # the stored text, unparsed
    ledger.c.token_count,
    ledger.c.content_hash,
    ledger.c.prev_hash,
    ledger.c.row_hash,
    ledger.c.global_position,
)
_KINDS = {kind.value: kind for kind in Kind}


_IN_RANGE = (
    ledger.c.session_id == sa.bindparam("sid"),
    ledger.c.position > sa.bindparam("after"),
    ledger.c.position <= sa.bindparam("upto"),
)
_CHUNK_QUERY = sa.select(*_COLUMNS).where(*_IN_RANGE)
"""One chunk: the records of a range of `CHUNK` positions, unsorted (the rows are sorted here).

Neither `ORDER BY` nor `LIMIT`: with them, the planner's estimate for a range in the middle of a
long session (the positions' statistics are the whole table's, mostly short sessions) is a tenth
of the truth, and it chose a bitmap scan of everything up to `upto` plus an external sort, per
chunk: 60-110 ms for 5,000 rows of a 100,000-record session against 4 ms along the index, until
a prepared statement's generic plan took over (never, in a fresh `verify --jobs` worker)."""
_NEXT_QUERY = sa.select(sa.func.min(ledger.c.position)).where(*_IN_RANGE)
"""The first position after a range that ended short: a gap (a tampered ledger) is stepped over,
not read through `CHUNK` positions at a time."""
_APPENDED_QUERY = sa.select(ledger.c.session_id, *_COLUMNS).where(
    ledger.c.global_position > sa.bindparam("after")
)
"""The records after a global position, unsorted: the rows are sorted here, by session and position
(a tenth of what the database's sort of the whole rows costs, and mostly in order already)."""
_position = attrgetter("position")
_session_position = attrgetter("session_id", "position")


@contextmanager
def snapshot(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A read transaction that sees one state of the database throughout, however many chunks it
    reads: REPEATABLE READ on PostgreSQL; on MariaDB/MySQL too, its snapshot taken as it begins
    (InnoDB takes it at the first read otherwise); in WAL mode any SQLite read transaction is one."""
    dialect = engine.dialect.name
    options = {"isolation_level": "REPEATABLE READ"} if dialect in ("postgresql", "mysql") else {}
    with engine.connect().execution_options(**options) as conn, conn.begin():
        if dialect == "mysql":  # the driver has sent no BEGIN: this one begins the transaction
            conn.exec_driver_sql("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        yield conn


def read_records(
    conn: sa.Connection, session_id: str, after: int = 0, upto: int = 2**62
) -> Iterator[tuple[LedgerRecord, bytes | None]]:
    """Each record of the session by position (those after `after` up to `upto`: `verify --jobs`
    reads a long session in ranges), with its payload's stored text in utf-8 (`None` once
    erased), read inside `conn`'s transaction: a `snapshot`, or the caller's write transaction,
    so the chunks agree with each other."""
    chunk_query, next_query = compiled(_CHUNK_QUERY, conn.dialect), compiled(_NEXT_QUERY, conn.dialect)
    cursor = _cursor(conn)
    chunk = CHUNK

    def fetch(start: int) -> tuple[list[Any], int | None]:
        """The chunk of positions after `start`, and where the next one starts (`None`: none)."""
        stop = min(start + chunk, upto)
        rows = chunk_query.rows(cursor, {"sid": session_id, "after": start, "upto": stop})
        rows.sort(key=_position)
        if stop >= upto:
            return rows, None
        if rows and rows[-1].position == stop:  # the chunk reaches its end: the next one follows
            return rows, stop
        [(found,)] = next_query.rows(cursor, {"sid": session_id, "after": stop, "upto": upto})
        return rows, None if found is None else found - 1

    try:
        for rows in _ahead(fetch, after):
            yield from _records(session_id, rows)
    finally:
        cursor.close()


def read_appended(
    conn: sa.Connection, after: int
) -> tuple[list[str], Iterator[tuple[str, list[tuple[LedgerRecord, bytes | None]]]]]:
    """The sessions written to after global position `after`, and each one's records written
    after it, by position, with their payloads' stored text: a range read of the primary key, so
    its cost follows the rows written since, not the ledger (`verify --since`). On the driver, as
    `read_records`. The rows are read on the call, the records made session by session as they
    are iterated: the connection is free meanwhile."""
    cursor = _cursor(conn)
    try:
        rows = compiled(_APPENDED_QUERY, conn.dialect).rows(cursor, {"after": after})
    finally:
        cursor.close()
    rows.sort(key=_session_position)
    groups = [
        (session_id, [row[1:] for row in group]) for session_id, group in groupby(rows, key=itemgetter(0))
    ]
    sessions = ((session_id, list(_records(session_id, group))) for session_id, group in groups)
    return [session_id for session_id, _ in groups], sessions


def _cursor(conn: sa.Connection) -> Any:
    """A driver cursor inside `conn`'s transaction; on PostgreSQL binary, `json` read as its bytes."""
    driver = driver_of(conn.connection)
    if conn.dialect.name != "postgresql":
        return driver.cursor()
    from sessionledger.infrastructure.ledger.postgres import binary_cursor  # loaded with the engine

    return binary_cursor(driver)


def _ahead(fetch: Callable[[int], tuple[list[Any], int | None]], start: int) -> Iterator[list[Any]]:
    """The chunks in order, the next one already being fetched while the caller has this one."""
    with ThreadPoolExecutor(1, thread_name_prefix="ledger-read") as pool:
        pending: Future[tuple[list[Any], int | None]] | None = pool.submit(fetch, start)
        while pending is not None:
            rows, following = pending.result()
            pending = None if following is None else pool.submit(fetch, following)
            yield rows


def _records(session_id: str, rows: list[Any]) -> Iterator[tuple[LedgerRecord, bytes | None]]:
    kinds = _KINDS
    for row in rows:
        (position, version, kind, event_id, occurred_at, recorded_at, event_type, branch, synthetic,
         text, token_count, content_hash, prev_hash, row_hash, global_position) = row  # fmt: skip
        if text is not None and type(text) is not bytes:  # SQLite's str; pure-Python psycopg's buffer
            text = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        record = LedgerRecord._trusted(
            session_id,
            position,
            version,
            kinds.get(kind, kind),  # an unknown kind (tampering) fails the row hash
            event_id,
            occurred_at,
            None if text is None else _parsed(text),
            content_hash,
            prev_hash,
            row_hash,
            event_type,
            branch,
            synthetic,
            recorded_at,
            token_count,
            global_position,
        )
        yield record, text


def _parsed(text: bytes) -> Any:
    """The payload; text that is not JSON (tampered: its digest cannot match) reads as empty."""
    try:
        return loads(text)
    except ValueError:
        return {}
