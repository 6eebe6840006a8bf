"""A session's live adapter entries (`domain.entries`), read newest first on the driver.

Entry and forget records are selected by the session's UNIQUE(session_id, position) index read
backward (from the head down to `after`), the entry's type and key prefix tested on the
`event_type` and `branch` columns (no payload is read for a row that does not match), a page at
a time: a read with a `limit` stops at the first page that holds that many live entries. Each
page is one autocommitted statement on the driver (`driver.py`): an adapter's read (a LangGraph
`get_tuple`) is one or two of them, where SQLAlchemy's execution layer cost more than the database.
`domain.entries.live_entries` then applies the forget rule, as the memory ledger does. The entry
log (`entry_log`) reads the rows after a position, oldest first, in one such statement.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from sessionledger.domain.entries import EntryRow, StoredEntry, entry_log_row, entry_row, live_entries
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.ledger.driver import Autocommit, DriverStatement, compiled
from sessionledger.infrastructure.ledger.schema import ledger

FULL_PAGE = 1000
"""The page of a read without a `limit` (it reads every page)."""
SPARE = 2
"""What a read with a `limit` asks for beyond it (forget records share the page)."""


def _entry(types: int) -> sa.ColumnElement[bool]:
    """An entry record of `types` types (parameters `t0`, ...) under the key prefix `prefix` (its
    length `plen`), tested on its columns, not its payload."""
    branch_prefix = sa.func.substr(ledger.c.branch, 1, sa.bindparam("plen", type_=sa.Integer))
    return sa.and_(
        ledger.c.kind == Kind.ENTRY.value,
        ledger.c.event_type.in_([sa.bindparam(f"t{n}", type_=sa.Text) for n in range(types)]),
        branch_prefix == sa.bindparam("prefix", type_=sa.Text),
    )


@functools.cache  # one statement per number of types: the driver's compiled form keys on it
def entries_query(types: int) -> sa.Select[tuple[int, object, str, object]]:
    """The session's readable forget records and its entries of `types` types (`_entry`), between
    positions `after` and `before`, newest first, at most `page`."""
    entry = _entry(types)
    return (
        sa.select(ledger.c.position, ledger.c.recorded_at, ledger.c.kind, ledger.c.payload)
        .where(
            ledger.c.session_id == sa.bindparam("sid", type_=sa.Text),
            ledger.c.position > sa.bindparam("after", type_=sa.BigInteger),
            ledger.c.position < sa.bindparam("before", type_=sa.BigInteger),
            ledger.c.payload.is_not(None),
            sa.or_(ledger.c.kind == Kind.FORGOTTEN.value, entry),
        )
        .order_by(ledger.c.position.desc())
        .limit(sa.bindparam("page", type_=sa.Integer))
    )


@functools.cache
def entry_log_query(types: int) -> sa.Select[tuple[int, object, str, object]]:
    """`entries_query`'s rows and the session's erasure after position `after`, oldest first: on
    the session's (session_id, position) index, a read of only what is new."""
    return (
        sa.select(ledger.c.position, ledger.c.recorded_at, ledger.c.kind, ledger.c.payload)
        .where(
            ledger.c.session_id == sa.bindparam("sid", type_=sa.Text),
            ledger.c.position > sa.bindparam("after", type_=sa.BigInteger),
            ledger.c.payload.is_not(None),
            sa.or_(ledger.c.kind == Kind.FORGOTTEN.value, ledger.c.kind == Kind.ERASURE.value, _entry(types)),
        )
        .order_by(ledger.c.position.asc())
    )


class EntryReads:
    """The entry reads of one database."""

    def __init__(self, engine: sa.Engine, autocommit: Autocommit) -> None:
        self._dialect = engine.dialect
        self._autocommit = autocommit

    def _query(self, types: int, log: bool = False) -> DriverStatement:
        return compiled(entry_log_query(types) if log else entries_query(types), self._dialect)

    def entries(
        self, session_id: str, types: Sequence[str], prefix: str, after: int, limit: int | None
    ) -> list[StoredEntry]:
        """See `domain.ports.Ledger.entries`."""
        query = self._query(len(types))
        page = FULL_PAGE if limit is None else limit + SPARE
        values = {
            "sid": session_id,
            "after": after,
            "plen": len(prefix),
            "prefix": prefix,
            "page": page,
            **{f"t{n}": entry_type for n, entry_type in enumerate(types)},
        }

        def rows() -> Iterator[EntryRow]:
            before = 2**62
            while True:
                with self._autocommit() as driver:
                    found = query.rows(driver.cursor(), {**values, "before": before})
                for position, recorded_at, kind, payload in found:
                    yield entry_row(position, recorded_at, kind, payload)
                if len(found) < page:
                    return
                before = found[-1][0]

        return list(live_entries(rows(), types, prefix, limit))

    def entry_log(self, session_id: str, types: Sequence[str], prefix: str, after: int) -> list[EntryRow]:
        """See `domain.ports.Ledger.entry_log`."""
        values = {
            "sid": session_id,
            "after": after,
            "plen": len(prefix),
            "prefix": prefix,
            **{f"t{n}": entry_type for n, entry_type in enumerate(types)},
        }
        with self._autocommit() as driver:
            found = self._query(len(types), log=True).rows(driver.cursor(), values)
        return [
            entry_log_row(position, recorded_at, kind, payload)
            for position, recorded_at, kind, payload in found
        ]
