"""Window changes: a compaction's write and a rewind, each under the session row lock, and the
window prefix (`window_slots`) they replace.

A compaction's write runs on the driver (`driver.py`) inside a Core transaction: its lock, its
read of what was appended since the compaction read, and then, pipelined on PostgreSQL, its rows,
the prefix swap and the session's new head and stats (one round trip for the lot). A rewind
(rare, and reading the whole session) runs on the Core `Connection`, with the same prefix swap.
What a compaction writes is `domain.write_plans.plan_compaction`, as in the memory ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sessionledger.domain.append_outcomes import Tally
from sessionledger.domain.codec import event_from_payload
from sessionledger.domain.errors import SessionNotFound
from sessionledger.domain.rewind import plan_rewind
from sessionledger.domain.window import Window, WindowStats
from sessionledger.domain.window_stats import window_stats
from sessionledger.domain.write_plans import LedgerHead, plan_compaction, require_new_event_ids
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.counters import add_counts
from sessionledger.infrastructure.ledger.driver import compiled, driver_of, integrity_errors, pipelined
from sessionledger.infrastructure.ledger.engine import WRITE
from sessionledger.infrastructure.ledger.heads import HeadCache, locked_head
from sessionledger.infrastructure.ledger.records import read_records
from sessionledger.infrastructure.ledger.rows import head_of, ledger_row, stats_columns
from sessionledger.infrastructure.ledger.schema import ledger, sessions

if TYPE_CHECKING:
    from sessionledger.domain.compaction import CompactionResult


class WindowPrefix:
    """The `window_slots` of a session: its window prefix (by ordinal) and its rewound rows."""

    def __init__(self, dialect: sa.Dialect) -> None:
        self._clear = compiled(statements.CLEAR_PREFIX, dialect)
        self._insert = compiled(statements.INSERT_SLOT, dialect)

    def replace(
        self, driver: Any, session_id: str, window: Sequence[int], hidden: Sequence[int] = ()
    ) -> None:
        """Swap the prefix for `window` and mark `hidden` rows rewound, on the driver connection
        of a transaction that holds the session row lock."""
        cursor = driver.cursor()
        self._clear.execute(cursor, {"sid": session_id})
        slots = [{"session_id": session_id, "position": p, "ordinal": i, "rewound": False}
                 for i, p in enumerate(window)]  # fmt: skip
        slots += [{"session_id": session_id, "position": p, "ordinal": None, "rewound": True} for p in hidden]
        if slots:  # a compaction may archive the whole window
            cursor.executemany(self._insert.sql, [self._insert.params(slot) for slot in slots])


class WindowChanges:
    """Compactions and rewinds of one database, moving the heads in `heads`."""

    def __init__(self, engine: sa.Engine, heads: HeadCache, prefix: WindowPrefix) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})
        self._heads = heads
        self._prefix = prefix
        self._lock_head = compiled(statements.LOCK_HEAD, engine.dialect)
        self._tail_after = compiled(statements.TAIL_AFTER, engine.dialect)
        self._insert_row = compiled(statements.INSERT_ROW, engine.dialect, statements.ROW_COLUMNS)
        self._compacted = compiled(statements.COMPACTED, engine.dialect)
        self._integrity_errors = integrity_errors(engine.dialect)

    def apply_compaction(
        self, read: Window, result: CompactionResult, source: str, tally: Tally | None = None
    ) -> int | None:
        """Under the session row lock, if the window epoch is still the one read: the plan's
        events and record, the new prefix, and the head, base, epoch and stats in one UPDATE.
        The stats come from the plan, plus the window's tail read only when the version moved
        since the read (something was appended meanwhile). The tally's counters come last."""
        if not read.events:
            return None
        session_id = read.events[0].session_id
        now = datetime.now(UTC)
        values = {"sid": session_id}
        try:
            with self._writer.begin() as conn:
                driver = driver_of(conn.connection)
                locked = self._lock_head.rows(driver.cursor(), values)
                if not locked:
                    raise SessionNotFound(f"session {session_id!r} not found")
                head = locked[0]
                if head.window_epoch != read.head.epoch:
                    return None
                # the ids taken are UNIQUE(session_id, event_id)'s to know: see `except` below
                plan = plan_compaction(read, result, head_of(head), at=now, source=source, taken=())
                stats: WindowStats | None = None
                # the new window is in hand but for events appended since the read, and for counts
                # the evaluator may have stored since (a count read as unknown is read again below)
                if plan.counted:
                    tail = (
                        self._tail_after.rows(driver.cursor(), {**values, "after": read.head.head_position})
                        if head.version != read.head.version
                        else []
                    )
                    appended = [
                        (event_from_payload(session_id, r.event_id, r.payload), r.token_count) for r in tail
                    ]
                    stats = window_stats([*plan.prefix, *appended])
                with pipelined(driver):
                    cursor = driver.cursor()
                    cursor.executemany(
                        self._insert_row.sql,
                        [
                            self._insert_row.params(ledger_row(record, draft.text))
                            for record, draft in plan.written
                        ],
                    )
                    self._prefix.replace(driver, session_id, plan.window)
                    self._compacted.execute(
                        cursor,
                        {
                            **values,
                            "new_version": plan.head.version,
                            "new_position": plan.head.position,
                            "new_hash": plan.head.hash,
                            "new_base": read.head.head_position,
                            **{f"new_{name}": n for name, n in stats_columns(stats or WindowStats()).items()},
                        },
                    )
                if stats is None:
                    refresh_window_stats(conn, session_id)
                if tally is not None:
                    add_counts(conn, tally.of_compaction())
        except self._integrity_errors:
            self._require_new_event_ids(session_id, plan.new_event_ids)
            raise
        self._heads.keep(session_id, plan.head)
        return plan.head.version

    def _require_new_event_ids(self, session_id: str, ids: list[str]) -> None:
        """The event id rule, once the unique index refused the compaction's write."""
        with self._engine.connect() as conn:
            taken = conn.execute(statements.taken_event_ids([session_id], ids))
            require_new_event_ids(ids, {row.event_id for row in taken})

    def apply_rewind(self, session_id: str, before_invocation_id: str) -> int:
        """Under the session row lock: the rewind record, the new prefix and hidden slots, state."""
        now = datetime.now(UTC)
        with self._writer.begin() as conn:
            head = locked_head(conn, session_id)
            if head is None:
                raise SessionNotFound(f"session {session_id!r} not found")
            records = [record for record, _ in read_records(conn, session_id)]
            draft = plan_rewind(records, before_invocation_id, now)
            record = head.place(session_id, draft, head.version + 1, now)
            conn.execute(statements.INSERT_ROW, [ledger_row(record, draft.text)])
            self._prefix.replace(
                driver_of(conn.connection), session_id, draft.payload["window"], draft.payload["hidden"]
            )
            state = conn.execute(sa.select(sessions.c.state).where(sessions.c.id == session_id)).scalar_one()
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(
                    version=record.version,
                    head_position=record.position,
                    head_hash=record.row_hash,
                    window_base=record.position,
                    window_epoch=sessions.c.window_epoch + 1,
                    state={**state, **draft.payload["state_delta"]},
                )
            )
            refresh_window_stats(conn, session_id)
        self._heads.keep(session_id, LedgerHead.of(record))
        return record.version


def refresh_window_stats(conn: sa.Connection, session_id: str) -> None:
    """Recompute every window stat from the window itself, after the window was replaced (the
    session row is locked by `conn`'s transaction)."""
    rows = conn.execute(
        statements.live_session_events(session_id)
        .add_columns(ledger.c.event_id, ledger.c.payload, ledger.c.token_count)
        .where(statements.IN_WINDOW)
        .order_by(statements.GROUP, statements.ORDER_KEY)
    ).all()
    stats = window_stats((event_from_payload(session_id, r.event_id, r.payload), r.token_count) for r in rows)
    conn.execute(sessions.update().where(sessions.c.id == session_id).values(**stats_columns(stats)))
