"""A session's live adapter entries (`domain.entries`), read newest first on a Core `Connection`.

Entry and forget records are selected by the session's UNIQUE(session_id, position) index read
backward, with the entry's type and key prefix tested on the `event_type` and `branch` columns
(no payload is read for a row that does not match), a page at a time: a read with a `limit`
stops at the first page that holds that many live entries. `domain.entries.live_entries` then
applies the forget rule, as the memory ledger does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.entries import EntryRow, StoredEntry, entry_log_row, entry_row, live_entries
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.ledger.schema import ledger

MIN_PAGE = 16
"""The smallest page a read with a `limit` asks for (forget records and older values share it)."""


def _entry(types: Sequence[str], prefix: str) -> sa.ColumnElement[bool]:
    """An entry record of `types` under `prefix` (tested on its columns, not its payload)."""
    entry = [ledger.c.kind == Kind.ENTRY.value, ledger.c.event_type.in_(list(types))]
    if prefix:
        entry.append(sa.func.substr(ledger.c.branch, 1, len(prefix)) == prefix)
    return sa.and_(*entry)


def entries_query(session_id: str, types: Sequence[str], prefix: str) -> sa.Select[Any]:
    """The session's readable forget records and its entries of `types` under `prefix`, newest
    first (the caller adds the page's bounds)."""
    return (
        sa.select(ledger.c.position, ledger.c.recorded_at, ledger.c.kind, ledger.c.payload)
        .where(
            ledger.c.session_id == session_id,
            ledger.c.payload.is_not(None),
            sa.or_(ledger.c.kind == Kind.FORGOTTEN.value, _entry(types, prefix)),
        )
        .order_by(ledger.c.position.desc())
    )


def entry_log_query(session_id: str, types: Sequence[str], prefix: str, after: int) -> sa.Select[Any]:
    """`entries_query`'s rows and the erasure record after position `after`, oldest first: on the
    session's (session_id, position) index, a read of only what is new."""
    return (
        sa.select(ledger.c.position, ledger.c.recorded_at, ledger.c.kind, ledger.c.payload)
        .where(
            ledger.c.session_id == session_id,
            ledger.c.position > after,
            ledger.c.payload.is_not(None),
            sa.or_(
                ledger.c.kind.in_([Kind.FORGOTTEN.value, Kind.ERASURE.value]),
                _entry(types, prefix),
            ),
        )
        .order_by(ledger.c.position.asc())
    )


class EntryReads:
    """The entry reads of one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine

    def entries(
        self, session_id: str, types: Sequence[str], prefix: str, limit: int | None
    ) -> list[StoredEntry]:
        """See `domain.ports.Ledger.entries`."""
        query = entries_query(session_id, types, prefix)
        page = None if limit is None else max(MIN_PAGE, 2 * limit)
        with self._engine.connect() as conn:

            def rows() -> Iterator[EntryRow]:
                before: int | None = None
                while True:
                    paged = query if before is None else query.where(ledger.c.position < before)
                    found = conn.execute(paged if page is None else paged.limit(page)).all()
                    for position, recorded_at, kind, payload in found:
                        yield entry_row(position, recorded_at, kind, payload)
                    if page is None or len(found) < page:
                        return
                    before = found[-1][0]

            return list(live_entries(rows(), types, prefix, limit))

    def entry_log(self, session_id: str, types: Sequence[str], prefix: str, after: int) -> list[EntryRow]:
        """See `domain.ports.Ledger.entry_log`."""
        with self._engine.connect() as conn:
            found = conn.execute(entry_log_query(session_id, types, prefix, after)).all()
        return [entry_log_row(*row) for row in found]
