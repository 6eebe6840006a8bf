"""`SqlLedger`: the ledger on PostgreSQL or SQLite, one code path through SQLAlchemy Core.

Write paths (docs/architecture.md "Concurrency rules"):
- one event: a conditional `UPDATE sessions ... WHERE head_position = :cached` moves the session
  head (version, position, hash, window stats), then one `INSERT` of the ledger row, in one
  transaction. The head is cached per ledger; a stale cache updates no row, re-reads and retries.
- a batch (workers): lock the batch's session rows in id order, drop known event ids, one
  multi-row INSERT, one executemany UPDATE of the heads.
- compaction: lock the session row, check the window epoch, write the synthetic events, the
  compaction record and the new window prefix.
The statements themselves, with the window rule of `domain.ledger.WindowShape` in SQL, are in
`infrastructure/ledger/statements.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from threading import Lock
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sessionledger.domain.codec import event_from_payload
from sessionledger.domain.errors import ConcurrencyConflict, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.ledger import (
    ERASABLE,
    GENESIS_HASH,
    Draft,
    LedgerRecord,
    canonical,
    created_draft,
    erasure_draft,
    event_bytes,
    window_stats,
)
from sessionledger.domain.ports import AppendOutcome, TailRow, TokenCounter, Window, WindowHead, WindowStats
from sessionledger.domain.restore import RestoredSession
from sessionledger.domain.rewind import plan_rewind
from sessionledger.domain.sessions import Session, merge_state, split_state_delta
from sessionledger.domain.turns import format_event, starts_turn
from sessionledger.domain.write_plans import (
    BatchSession,
    LedgerHead,
    appended_event,
    batch_keys,
    plan_batch,
    plan_compaction,
    require_new_event_ids,
)
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.driver import (
    DriverStatement,
    autocommit,
    pipelined,
    write_transaction,
)
from sessionledger.infrastructure.ledger.engine import WRITE, upsert_insert
from sessionledger.infrastructure.ledger.records import read_records, snapshot
from sessionledger.infrastructure.ledger.schema import app_states, ledger, sessions, user_states, window_slots

if TYPE_CHECKING:
    from sessionledger.domain.compaction import CompactionResult


def _now() -> datetime:
    return datetime.now(UTC)


_MAX_HEAD_RACES = 1000


class SqlLedger:
    """The durable ledger; safe to share between threads, and between processes on one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})
        self._postgres = engine.dialect.name == "postgresql"
        self._move_head = DriverStatement(statements.MOVE_HEAD, engine.dialect)
        self._insert_row = DriverStatement(ledger.insert().inline(), engine.dialect, statements.ROW_COLUMNS)
        # PostgreSQL: both in one statement, atomic on its own, so it runs in autocommit (one round trip)
        self._append_row = DriverStatement(statements.APPEND_ROW, engine.dialect) if self._postgres else None
        # a compaction: its read, and its write under the session row lock
        self._session = DriverStatement(
            statements.SESSIONS.where(sessions.c.id == statements.SID), engine.dialect
        )
        self._window_head = DriverStatement(statements.WINDOW_HEAD, engine.dialect)
        self._window = DriverStatement(statements.WINDOW, engine.dialect)
        self._lock_head = DriverStatement(statements.LOCK_HEAD, engine.dialect)
        self._tail_after = DriverStatement(statements.TAIL_AFTER, engine.dialect)
        self._clear_prefix = DriverStatement(statements.CLEAR_PREFIX, engine.dialect)
        self._insert_slot = DriverStatement(window_slots.insert(), engine.dialect)
        self._compacted = DriverStatement(statements.COMPACTED, engine.dialect)
        self._integrity_errors = (sa.exc.IntegrityError, engine.dialect.loaded_dbapi.IntegrityError)
        self._heads: dict[str, LedgerHead] = {}
        self._heads_lock = Lock()

    @property
    def engine(self) -> sa.Engine:
        return self._engine

    def close(self) -> None:
        self._engine.dispose()

    # --- sessions ---------------------------------------------------------------------------

    def create_session(self, session: Session, state: Mapping[str, Any]) -> None:
        draft = created_draft(session, state)
        record = draft.place(session.id, 1, 0, GENESIS_HASH)
        head = LedgerHead(1, record.row_hash, 0)
        scopes = split_state_delta(state)
        try:
            with self._writer.begin() as conn:
                conn.execute(sessions.insert().values(_session_row(session, scopes.session, head)))
                conn.execute(ledger.insert(), [_row(record, draft.text, _now())])
                self._merge_shared_state(
                    conn, {session.app_name: scopes.app}, {(session.app_name, session.user_id): scopes.user}
                )
        except sa.exc.IntegrityError:
            raise _taken(session.id) from None
        self._cache(session.id, head)

    def restore(self, restored: RestoredSession) -> None:
        session, last = restored.session, restored.head
        head = LedgerHead(last.position, last.row_hash, last.version)
        now = _now()
        rows = [_row(r, None if r.payload is None else canonical(r.payload), r.recorded_at or now)
                for r in restored.records]  # fmt: skip
        try:
            with self._writer.begin() as conn:
                conn.execute(
                    sessions.insert().values(
                        {
                            **_session_row(session, restored.projection.session_state, head),
                            "window_base": restored.projection.shape.base,
                            "window_epoch": restored.projection.epoch,
                            **_stats_columns(restored.stats),
                        }
                    )
                )
                conn.execute(ledger.insert(), rows)
                self._replace_prefix(
                    conn.connection.dbapi_connection,
                    session.id,
                    restored.projection.shape.prefix,
                    sorted(restored.projection.shape.hidden),
                )
        except sa.exc.IntegrityError:
            raise _taken(session.id) from None
        self._cache(session.id, head)

    def get_session(self, session_id: str) -> Session | None:
        with autocommit(self._engine) as driver:
            rows = self._session.rows(driver.cursor(), {"sid": session_id})
        return _session(dict(zip(self._session.keys, rows[0], strict=True))) if rows else None

    def list_sessions(self, user_id: str, app_name: str | None) -> list[Session]:
        query = statements.SESSIONS.where(sessions.c.user_id == user_id)
        if app_name is not None:
            query = query.where(sessions.c.app_name == app_name)
        created = ledger.alias("created")
        query = query.join(created, sa.and_(created.c.session_id == sessions.c.id, created.c.position == 1))
        query = query.order_by(sessions.c.created_at, created.c.global_position)
        with self._engine.connect() as conn:
            return [_session(row._mapping) for row in conn.execute(query)]

    def delete_session(self, session_id: str, reason: str) -> bool:
        now = _now()
        with self._writer.begin() as conn:
            head = self._locked_head(conn, session_id)
            if head is None:
                return False
            draft = erasure_draft(at=now, reason=reason)
            record = draft.place(session_id, head.position + 1, head.version, head.hash)
            if self._postgres:  # the one path ledger_guard lets null a payload
                conn.execute(sa.select(sa.func.set_config("sessionledger.erasing", session_id, True)))
            conn.execute(
                ledger.update()
                .where(
                    ledger.c.session_id == session_id,
                    ledger.c.kind.in_(sorted(kind.value for kind in ERASABLE)),
                    ledger.c.payload.is_not(None),
                )
                .values(payload=None)
            )
            conn.execute(ledger.insert(), [_row(record, draft.text, now)])
            conn.execute(window_slots.delete().where(window_slots.c.session_id == session_id))
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(
                    deleted_at=now,
                    metadata={},
                    state={},
                    head_position=record.position,
                    head_hash=record.row_hash,
                    lease_owner=None,
                    lease_until=None,
                    **dict.fromkeys(statements.STATS, 0),
                )
            )
        self._forget(session_id)
        return True

    def expired_session_ids(self, now: datetime) -> list[str]:
        query = (
            sa.select(sessions.c.id)
            .where(sessions.c.expires_at < now, sessions.c.deleted_at.is_(None))
            .order_by(sessions.c.expires_at, sessions.c.id)
        )
        with self._engine.connect() as conn:
            return list(conn.execute(query).scalars())

    # --- appends ----------------------------------------------------------------------------

    def append(self, drafts: Sequence[Draft]) -> list[AppendOutcome]:
        """See `domain.ports.Ledger.append`: the batch ingest path (one transaction per call)."""
        if len(drafts) == 1:
            return [self._append_one(drafts[0])]
        if not drafts:
            return []
        return self._append_batch(drafts)

    def _append_one(self, draft: Draft) -> AppendOutcome:
        """The one-event path: move the cached head and insert the row, atomically.

        The head moves only from the cached position; when it moved elsewhere (an append, a
        compaction, a deletion) nothing is written and the head is re-read and the append
        retried. On PostgreSQL the two writes are one autocommitted statement (one round trip);
        on SQLite, and with a state delta, two statements in one transaction. An INSERT that
        violates UNIQUE(session_id, event_id) is the idempotent duplicate.
        """
        event = appended_event(draft)
        session_id = event.session_id
        scopes = split_state_delta(event.state_delta)
        moves = {
            "sid": session_id,
            "turn": int(starts_turn(event)),
            "size": event_bytes(event),
            "keep_count": 0 if event.is_synthetic else 1,
        }
        for _ in range(_MAX_HEAD_RACES):
            head = self._heads.get(session_id) or self._read_head(session_id)
            if head is None:
                return AppendOutcome.NO_SESSION
            record = draft.place(session_id, head.position + 1, head.version + 1, head.hash)
            moves.update(cached=head.position, new_position=record.position, new_hash=record.row_hash)
            values = {**moves, **_row(record, draft.text, _now())}
            try:
                if any(scopes):
                    with self._writer.begin() as conn:
                        moved = self._move_and_insert(conn.connection.dbapi_connection, values)
                        if moved:
                            self._merge_state(conn, session_id, scopes)
                elif self._append_row is not None:
                    with autocommit(self._engine) as driver:
                        cursor = driver.cursor()
                        self._append_row.execute(cursor, values)
                        moved = cursor.rowcount == 1
                else:
                    with write_transaction(self._engine) as driver:
                        moved = self._move_and_insert(driver, values)
            except self._integrity_errors:
                self._forget(session_id)
                if self._has_event(session_id, event.id):
                    return AppendOutcome.DUPLICATE
                continue  # someone else took the position: re-read the head and retry
            if moved:
                self._cache(session_id, LedgerHead(record.position, record.row_hash, record.version))
                return AppendOutcome.STORED
            self._forget(session_id)  # the head moved: re-read it and retry
        raise ConcurrencyConflict(
            f"append to {session_id!r} lost {_MAX_HEAD_RACES} races for the ledger head"
        )

    def _move_and_insert(self, driver: Any, values: dict[str, Any]) -> bool:
        """Move the head, then insert the row if it moved (inside the caller's transaction)."""
        move = driver.cursor()
        self._move_head.execute(move, values)
        if move.rowcount != 1:
            return False
        self._insert_row.execute(driver.cursor(), values)
        return True

    def _append_batch(self, drafts: Sequence[Draft]) -> list[AppendOutcome]:
        """`domain.write_plans.plan_batch` under the batch's session row locks: one multi-row
        INSERT, one executemany UPDATE of the heads, then the app and user state merges."""
        keys = batch_keys(drafts)
        with self._writer.begin() as conn:
            if self._postgres:
                # psycopg prepares repeated statements; a generic plan of the duplicate check below
                # (hundreds of ids in an IN list) turned into a filter over the whole session once
                # autoanalyze saw a large session: 0.3 s -> 8 s per batch at 68,000 events.
                conn.execute(sa.text("SET LOCAL plan_cache_mode = force_custom_plan"))
            locked = conn.execute(
                sa.select(sessions)
                .where(sessions.c.id.in_(sorted({sid for sid, _ in keys})), sessions.c.deleted_at.is_(None))
                .order_by(sessions.c.id)
                .with_for_update()
            ).all()
            now = _now()  # under the lock: a later batch of these sessions records a later time
            live = {
                row.id: BatchSession(
                    LedgerHead(row.head_position, row.head_hash, row.version),
                    _stats(row),
                    row.state,
                    row.app_name,
                    row.user_id,
                )
                for row in locked
            }
            taken = conn.execute(
                sa.select(ledger.c.session_id, ledger.c.event_id).where(
                    ledger.c.session_id.in_(list(live)),
                    ledger.c.event_id.in_(sorted({eid for _, eid in keys})),
                )
            )
            plan = plan_batch(drafts, live, {(row.session_id, row.event_id) for row in taken})
            if plan.appended:
                conn.execute(
                    ledger.insert(), [_row(record, draft.text, now) for record, draft in plan.appended]
                )
                conn.execute(
                    sessions.update()
                    .where(sessions.c.id == sa.bindparam("sid"))
                    .values(
                        version=sa.bindparam("new_version"),
                        head_position=sa.bindparam("new_position"),
                        head_hash=sa.bindparam("new_hash"),
                        state=sa.bindparam("new_state", type_=sessions.c.state.type),
                        **{name: sa.bindparam(f"new_{name}") for name in statements.STATS},
                    ),
                    [
                        {
                            "sid": sid,
                            "new_version": session.head.version,
                            "new_position": session.head.position,
                            "new_hash": session.head.hash,
                            "new_state": session.state,
                            **{f"new_{name}": value for name, value in _stats_columns(session.stats).items()},
                        }
                        for sid, session in plan.sessions.items()
                    ],
                )
                self._merge_shared_state(conn, plan.app_states, plan.user_states)
        for sid, session in plan.sessions.items():
            self._cache(sid, session.head)
        return plan.outcomes

    # --- reads ------------------------------------------------------------------------------

    def events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        query = statements.live_session_events(session_id).add_columns(ledger.c.event_id, ledger.c.payload)
        query = query.where(*statements.criteria(filter))
        in_python = filter.pattern is not None
        if not in_python and filter.last_n is not None:
            query = statements.last_rows(
                query, session_id, filter.last_n, archived=not filter.exclude_archived
            )
        else:
            query = query.add_columns(statements.GROUP)
            query = query.order_by(statements.GROUP, statements.ORDER_KEY)
            if not in_python and filter.page_size is not None:
                query = query.limit(filter.page_size).offset((filter.page or 0) * filter.page_size)
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
        if not in_python and filter.last_n is not None:
            rows.reverse()
        events = [event_from_payload(session_id, eid, payload, group == 0) for eid, payload, group in rows]
        return filter.select(events) if in_python else events

    def version(self, session_id: str) -> int:
        with self._engine.connect() as conn:
            version = conn.execute(
                sa.select(sessions.c.version).where(
                    sessions.c.id == session_id, sessions.c.deleted_at.is_(None)
                )
            ).scalar()
        return version or 0

    def window(self, session_id: str) -> Window | None:
        """The active window, its head and stats, in one statement on the driver (one round trip),
        each event built while the server still sends the rows after it."""
        values = {"sid": session_id}
        head: Sequence[Any] = ()
        entries = []
        with autocommit(self._engine) as driver:
            for row in self._window.stream(driver.cursor(), values, _WINDOW_CHUNK):
                head = row
                event = event_from_payload(
                    session_id, row[statements.WINDOW_EVENT_ID], row[statements.WINDOW_PAYLOAD]
                )
                entries.append(
                    (
                        row[0],
                        row[1],
                        row[statements.WINDOW_POSITION],
                        row[statements.WINDOW_TOKEN_COUNT],
                        event,
                    )
                )
            if not entries:  # an empty window, or no such live session
                found = self._window_head.rows(driver.cursor(), values)
                if not found:
                    return None
                version, epoch, base, *stats = found[0]
                return Window(WindowHead(version, epoch, base), (), (), WindowStats(*stats))
        entries.sort(key=statements.WINDOW_ORDER)
        positions = tuple(entry[2] for entry in entries)
        return Window(
            WindowHead(head[statements.WINDOW_VERSION], head[statements.WINDOW_EPOCH], max(positions)),
            tuple(entry[4] for entry in entries),
            positions,
            WindowStats(
                *head[statements.WINDOW_FIRST_STAT : statements.WINDOW_FIRST_STAT + len(statements.STATS)]
            ),
            tuple(entry[3] for entry in entries),
        )

    def window_stats(self, session_id: str) -> WindowStats | None:
        with autocommit(self._engine) as driver:
            rows = self._window_head.rows(driver.cursor(), {"sid": session_id})
        return WindowStats(*rows[0][3:]) if rows else None

    def fill_token_counts(self, session_id: str, counter: TokenCounter) -> int:
        query = (
            statements.live_session_events(session_id)
            .add_columns(ledger.c.position, ledger.c.event_id, ledger.c.payload)
            .where(statements.IN_WINDOW, ledger.c.token_count.is_(None))
        )
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
        if not rows:
            return 0
        counts = [
            {"sid": session_id, "pos": r.position, "count": counter(format_event(
                event_from_payload(session_id, r.event_id, r.payload)))}
            for r in rows
        ]  # fmt: skip
        with self._writer.begin() as conn:
            if self._locked_head(conn, session_id) is None:
                return 0
            conn.execute(
                ledger.update()
                .where(
                    ledger.c.session_id == sa.bindparam("sid"),
                    ledger.c.position == sa.bindparam("pos"),
                    ledger.c.token_count.is_(None),
                )
                .values(token_count=sa.bindparam("count")),
                counts,
            )
            self._refresh_token_stats(conn, session_id)
        return len(counts)

    def _refresh_token_stats(self, conn: sa.Connection, session_id: str) -> None:
        """Recompute the window's token sum and uncounted events (the session row is locked)."""
        tokens, uncounted = conn.execute(
            statements.live_session_events(session_id)
            .add_columns(
                sa.func.coalesce(sa.func.sum(ledger.c.token_count), 0),
                sa.func.count() - sa.func.count(ledger.c.token_count),
            )
            .where(statements.IN_WINDOW)
        ).one()
        conn.execute(
            sessions.update()
            .where(sessions.c.id == session_id)
            .values(window_tokens=tokens, window_uncounted=uncounted)
        )

    # --- window changes ---------------------------------------------------------------------

    def apply_compaction(self, read: Window, result: CompactionResult, source: str) -> int | None:
        """Under the session row lock, if the window epoch is still the one read: the synthetic
        events, the compaction record, the new prefix, and the head, base, epoch and stats in one
        UPDATE. The statements run on the driver; the window's tail is read only when the version
        moved since the read (something was appended meanwhile)."""
        if not read.events:
            return None
        session_id = read.events[0].session_id
        now = _now()
        values = {"sid": session_id}
        try:
            with self._writer.begin() as conn:
                driver = conn.connection.dbapi_connection
                locked = self._lock_head.rows(driver.cursor(), values)
                if not locked:
                    raise SessionNotFound(f"session {session_id!r} not found")
                head_position, head_hash, version, epoch = locked[0]
                if epoch != read.head.epoch:
                    return None
                # the event id rule's "taken" is UNIQUE(session_id, event_id) here: see below
                plan = plan_compaction(
                    read,
                    result,
                    LedgerHead(head_position, head_hash, version),
                    at=now,
                    source=source,
                    taken=(),
                )
                stats: WindowStats | None = None
                # the new window is in hand but for events appended since the read, and for counts
                # the evaluator may have stored since (a count read as unknown is read again below)
                if plan.counted:
                    tail = (
                        self._tail_after.rows(driver.cursor(), {**values, "after": read.head.head_position})
                        if version != read.head.version
                        else []
                    )
                    appended_events = [(event_from_payload(session_id, e, p), n) for e, p, n in tail]
                    stats = window_stats([*plan.prefix, *appended_events])
                with pipelined(driver):
                    cursor = driver.cursor()
                    cursor.executemany(
                        self._insert_row.sql,
                        [
                            self._insert_row.params(_row(record, draft.text, now))
                            for record, draft in plan.written
                        ],
                    )
                    self._replace_prefix(driver, session_id, plan.window)
                    self._compacted.execute(
                        cursor,
                        {
                            **values,
                            "new_version": plan.head.version,
                            "new_position": plan.head.position,
                            "new_hash": plan.head.hash,
                            "new_base": read.head.head_position,
                            **{
                                f"new_{name}": n for name, n in _stats_columns(stats or WindowStats()).items()
                            },
                        },
                    )
                if stats is None:
                    self._refresh_window_stats(conn, session_id)
        except self._integrity_errors:
            with self._engine.connect() as conn:
                taken = conn.execute(
                    sa.select(ledger.c.event_id).where(
                        ledger.c.session_id == session_id, ledger.c.event_id.in_(plan.new_event_ids)
                    )
                ).scalars()
                require_new_event_ids(plan.new_event_ids, set(taken))
            raise
        self._cache(session_id, plan.head)
        return plan.head.version

    def _replace_prefix(
        self, driver: Any, session_id: str, window: Sequence[int], hidden: Sequence[int] = ()
    ) -> None:
        """Swap the window prefix for `window` and mark `hidden` rows rewound (under the session
        row lock, on the transaction's driver connection)."""
        cursor = driver.cursor()
        self._clear_prefix.execute(cursor, {"sid": session_id})
        slots = [{"session_id": session_id, "position": p, "ordinal": i, "rewound": False}
                 for i, p in enumerate(window)]  # fmt: skip
        slots += [{"session_id": session_id, "position": p, "ordinal": None, "rewound": True} for p in hidden]
        if slots:  # a compaction may archive the whole window
            cursor.executemany(self._insert_slot.sql, [self._insert_slot.params(slot) for slot in slots])

    def _refresh_window_stats(self, conn: sa.Connection, session_id: str) -> None:
        """Recompute every window stat from the window itself (after the window was replaced)."""
        rows = conn.execute(
            statements.live_session_events(session_id)
            .add_columns(ledger.c.event_id, ledger.c.payload, ledger.c.token_count)
            .where(statements.IN_WINDOW)
            .order_by(statements.GROUP, statements.ORDER_KEY)
        ).all()
        stats = window_stats(
            (event_from_payload(session_id, r.event_id, r.payload), r.token_count) for r in rows
        )
        conn.execute(sessions.update().where(sessions.c.id == session_id).values(**_stats_columns(stats)))

    def apply_rewind(self, session_id: str, before_invocation_id: str) -> int:
        """Under the session row lock: the rewind record, the new prefix and hidden slots, state."""
        now = _now()
        with self._writer.begin() as conn:
            head = self._locked_head(conn, session_id)
            if head is None:
                raise SessionNotFound(f"session {session_id!r} not found")
            records = [record for record, _ in read_records(conn, session_id)]
            draft = plan_rewind(records, before_invocation_id, now)
            version = head.version + 1
            record = draft.place(session_id, head.position + 1, version, head.hash)
            conn.execute(ledger.insert(), [_row(record, draft.text, now)])
            self._replace_prefix(
                conn.connection.dbapi_connection, session_id, draft.payload["window"], draft.payload["hidden"]
            )
            state = conn.execute(sa.select(sessions.c.state).where(sessions.c.id == session_id)).scalar_one()
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(
                    version=version,
                    head_position=record.position,
                    head_hash=record.row_hash,
                    window_base=record.position,
                    window_epoch=sessions.c.window_epoch + 1,
                    state={**state, **draft.payload["state_delta"]},
                )
            )
            self._refresh_window_stats(conn, session_id)
        self._cache(session_id, LedgerHead(record.position, record.row_hash, version))
        return version

    # --- state ------------------------------------------------------------------------------

    def app_state(self, app_name: str) -> Mapping[str, Any]:
        with self._engine.connect() as conn:
            state = conn.execute(
                sa.select(app_states.c.state).where(app_states.c.app_name == app_name)
            ).scalar()
        return state or {}

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]:
        with self._engine.connect() as conn:
            state = conn.execute(
                sa.select(user_states.c.state).where(
                    user_states.c.app_name == app_name, user_states.c.user_id == user_id
                )
            ).scalar()
        return state or {}

    def _merge_state(self, conn: sa.Connection, session_id: str, scopes: Any) -> None:
        """Apply a state delta inside an append (the session row is already locked by the append)."""
        row = conn.execute(
            sa.select(sessions.c.state, sessions.c.app_name, sessions.c.user_id).where(
                sessions.c.id == session_id
            )
        ).one()
        if scopes.session:
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(state={**row.state, **scopes.session})
            )
        self._merge_shared_state(conn, {row.app_name: scopes.app}, {(row.app_name, row.user_id): scopes.user})

    def _merge_shared_state(
        self,
        conn: sa.Connection,
        apps: Mapping[str, dict[str, Any]],
        users: Mapping[tuple[str, str], dict[str, Any]],
    ) -> None:
        """Shallow per-key merge of state deltas into the app and the (app, user) scopes, under
        their row locks."""
        deltas = [(app_states, {"app_name": app}, delta) for app, delta in apps.items()]
        deltas += [
            (user_states, {"app_name": app, "user_id": user}, delta) for (app, user), delta in users.items()
        ]
        for table, key, delta in deltas:
            if not delta:
                continue
            conn.execute(upsert_insert(self._engine, table).values(**key, state={}).on_conflict_do_nothing())
            where = [table.c[name] == value for name, value in key.items()]
            current = conn.execute(sa.select(table.c.state).where(*where).with_for_update()).scalar_one()
            conn.execute(table.update().where(*where).values(state={**current, **delta}))

    # --- audit and relay --------------------------------------------------------------------

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
            return [TailRow(*row) for row in conn.execute(query)]

    # --- heads ------------------------------------------------------------------------------

    def _read_head(self, session_id: str) -> LedgerHead | None:
        with self._engine.connect() as conn:
            row = conn.execute(
                sa.select(sessions.c.head_position, sessions.c.head_hash, sessions.c.version).where(
                    sessions.c.id == session_id, sessions.c.deleted_at.is_(None)
                )
            ).first()
        return None if row is None else LedgerHead(*row)

    def _locked_head(self, conn: sa.Connection, session_id: str) -> LedgerHead | None:
        row = conn.execute(
            sa.select(sessions.c.head_position, sessions.c.head_hash, sessions.c.version)
            .where(sessions.c.id == session_id, sessions.c.deleted_at.is_(None))
            .with_for_update()
        ).first()
        return None if row is None else LedgerHead(*row)

    def _has_event(self, session_id: str, event_id: str) -> bool:
        with self._engine.connect() as conn:
            return (
                conn.execute(
                    sa.select(ledger.c.position).where(
                        ledger.c.session_id == session_id, ledger.c.event_id == event_id
                    )
                ).first()
                is not None
            )

    def _cache(self, session_id: str, head: LedgerHead) -> None:
        with self._heads_lock:
            cached = self._heads.get(session_id)
            if cached is None or cached.position < head.position:
                self._heads[session_id] = head

    def _forget(self, session_id: str) -> None:
        with self._heads_lock:
            self._heads.pop(session_id, None)


def _taken(session_id: str) -> ValueError:
    return ValueError(f"session {session_id!r} already exists (or existed and was deleted)")


def _session(row: Mapping[str, Any]) -> Session:
    return Session(
        id=row["id"],
        user_id=row["user_id"],
        app_name=row["app_name"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        metadata=row["metadata"],
        state=merge_state(row["state"], row["app_state"] or {}, row["user_state"] or {}),
    )


def _row(record: LedgerRecord, text: str | None, recorded_at: datetime) -> dict[str, Any]:
    """A `ledger` row: the record, its payload's canonical text (`None`: erased), when it was stored."""
    return {
        "session_id": record.session_id,
        "position": record.position,
        "version": record.version,
        "event_id": record.event_id,
        "kind": record.kind.value,
        "occurred_at": record.occurred_at,
        "recorded_at": recorded_at,
        "event_type": record.event_type,
        "branch": record.branch,
        "synthetic": record.synthetic,
        "payload": text,
        "token_count": record.token_count,
        "content_hash": record.content_hash,
        "prev_hash": record.prev_hash,
        "row_hash": record.row_hash,
    }


def _session_row(session: Session, state: Mapping[str, Any], head: LedgerHead) -> dict[str, Any]:
    """A `sessions` row at `head` (the window columns keep their defaults)."""
    return {
        "id": session.id,
        "app_name": session.app_name,
        "user_id": session.user_id,
        "created_at": session.created_at,
        "expires_at": session.expires_at,
        "metadata": dict(session.metadata),
        "state": dict(state),
        "version": head.version,
        "head_position": head.position,
        "head_hash": head.hash,
    }


_WINDOW_CHUNK = 50
"""Rows per chunk of a window read: 1,000 rows in chunks of 50 took 20-25% less time than in one."""


def _stats(row: Any) -> WindowStats:
    return WindowStats(*(row._mapping[name] for name in statements.STATS))


def _stats_columns(stats: WindowStats) -> dict[str, int]:
    return dict(zip(statements.STATS, (stats.events, stats.turns, stats.bytes, stats.tokens, stats.uncounted,
                             stats.events_since_summary), strict=True))  # fmt: skip
