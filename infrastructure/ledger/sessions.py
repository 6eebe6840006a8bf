"""Sessions: their creation (new, or restored from records made elsewhere), reads, deletion and
expiry. SQLAlchemy Core on a `Connection` (one statement or one short transaction per call),
but for `get_session` on the driver (`driver.py`): the service reads the session at every
compaction attempt and every owner check, one row where SQLAlchemy's layer is most of the cost;
and a restored session's records go in as a batch's do (`driver.BulkInsert`: COPY on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.errors import SessionExists
from sessionledger.domain.hashing import GENESIS_HASH, canonical
from sessionledger.domain.records import ERASABLE, created_draft, erasure_draft
from sessionledger.domain.restore import RestoredSession
from sessionledger.domain.sessions import Session, split_state_delta
from sessionledger.domain.write_plans import LedgerHead
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.driver import Autocommit, BulkInsert, compiled, driver_of
from sessionledger.infrastructure.ledger.engine import WRITE
from sessionledger.infrastructure.ledger.heads import HeadCache, locked_head
from sessionledger.infrastructure.ledger.rows import (
    head_of,
    ledger_row,
    session_of,
    session_row,
    stats_columns,
)
from sessionledger.infrastructure.ledger.schema import ledger, sessions, window_slots
from sessionledger.infrastructure.ledger.state import StateScopes
from sessionledger.infrastructure.ledger.text_index import erasure_lock, ledger_text
from sessionledger.infrastructure.ledger.window_changes import WindowPrefix

_SESSION = statements.SESSIONS.where(sessions.c.id == statements.SID)
"""A live session's row by its id."""
_VERSION = sa.select(sessions.c.version).where(
    sessions.c.id == statements.SID, sessions.c.deleted_at.is_(None)
)
"""A live session's version."""


class Sessions:
    """The sessions of one database, keeping the heads in `heads` as they create and delete."""

    def __init__(
        self,
        engine: sa.Engine,
        autocommit: Autocommit,
        heads: HeadCache,
        state: StateScopes,
        prefix: WindowPrefix,
    ) -> None:
        self._autocommit = autocommit
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})
        self._dialect = engine.dialect.name
        self._heads = heads
        self._state = state
        self._prefix = prefix
        self._bulk_rows = BulkInsert(ledger, engine.dialect, statements.ROW_COLUMNS)
        self._session = compiled(_SESSION, engine.dialect)
        self._version = compiled(_VERSION, engine.dialect)

    def create(self, session: Session, state: Mapping[str, Any]) -> None:
        draft = created_draft(session, state)
        record = draft.place(session.id, 1, 0, GENESIS_HASH, datetime.now(UTC))
        head = LedgerHead.of(record)
        scopes = split_state_delta(state)
        try:
            with self._writer.begin() as conn:
                conn.execute(sessions.insert(), session_row(session, scopes.session, head))
                # shared state first: its row locks then order the ledger rows' global positions
                self._state.merge_shared(
                    conn, {session.app_name: scopes.app}, {(session.app_name, session.user_id): scopes.user}
                )
                conn.execute(statements.INSERT_ROW, [ledger_row(record, draft.text)])
        except sa.exc.IntegrityError:
            raise SessionExists.taken(session.id) from None
        self._heads.keep(session.id, head)

    def restore(self, restored: RestoredSession) -> None:
        """The records verbatim, and the session row and window prefix their projection defines."""
        session, head = restored.session, LedgerHead.of(restored.head)
        now = datetime.now(UTC)
        rows = [ledger_row(r, None if r.payload is None else canonical(r.payload), r.recorded_at or now)
                for r in restored.records]  # fmt: skip
        try:
            with self._writer.begin() as conn:
                conn.execute(
                    sessions.insert().values(
                        {
                            **session_row(session, restored.projection.session_state, head),
                            "window_base": restored.projection.shape.base,
                            "window_epoch": restored.projection.epoch,
                            **stats_columns(restored.stats),
                        }
                    )
                )
                self._state.merge_shared(  # first, as `create` does
                    conn,
                    {session.app_name: dict(restored.app_state)},
                    {(session.app_name, session.user_id): dict(restored.user_state)},
                )
                self._bulk_rows.write(driver_of(conn.connection), rows)
                self._prefix.replace(
                    driver_of(conn.connection),
                    session.id,
                    restored.projection.shape.prefix,
                    sorted(restored.projection.shape.hidden),
                )
        except sa.exc.IntegrityError:
            raise SessionExists.taken(session.id) from None
        self._heads.keep(session.id, head)

    def get(self, session_id: str) -> Session | None:
        """The live session; its head, in the row read, is kept for the append that usually comes
        next (an agent reads its session, then writes to it), which then reads nothing first."""
        with self._autocommit() as driver:
            rows = self._session.rows(driver.cursor(), {"sid": session_id})
        if not rows:
            return None
        self._heads.keep(session_id, head_of(rows[0]))
        return session_of(rows[0])

    def listed(
        self,
        user_id: str | None,
        app_name: str | None,
        *,
        newest_first: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Session]:
        """Live sessions (of `user_id` when given) in creation order, or newest first; a page of them."""
        query = statements.SESSIONS
        if user_id is not None:
            query = query.where(sessions.c.user_id == user_id)
        if app_name is not None:
            query = query.where(sessions.c.app_name == app_name)
        created = ledger.alias("created")
        query = query.join(created, sa.and_(created.c.session_id == sessions.c.id, created.c.position == 1))
        order = (sessions.c.created_at, created.c.global_position)
        query = query.order_by(*(column.desc() for column in order) if newest_first else order)
        query = query.limit(limit).offset(offset or None)
        with self._engine.connect() as conn:
            return [session_of(row) for row in conn.execute(query)]

    def version(self, session_id: str) -> int:
        """One autocommitted statement (one round trip): adapters read it to check a session copy."""
        with self._autocommit() as driver:
            rows = self._version.rows(driver.cursor(), {"sid": session_id})
        return rows[0].version if rows else 0

    def delete(self, session_id: str, reason: str) -> bool:
        """One transaction: the erasure record, the erasable payloads nulled (and their text out of
        the keyword index), the session row
        cleared and marked deleted, its window slots dropped."""
        now = datetime.now(UTC)
        with self._writer.begin() as conn:
            head = locked_head(conn, session_id)
            if head is None:
                return False
            draft = erasure_draft(at=now, reason=reason)
            record = head.place(session_id, draft, head.version, now)
            _erase_payloads(conn, self._dialect, session_id)
            if self._dialect == "postgresql":  # SQLite's index forgets the text by trigger, here too
                conn.execute(sa.select(erasure_lock(session_id, shared=False)))  # no indexer mid-way
                conn.execute(ledger_text.delete().where(ledger_text.c.session_id == session_id))
            conn.execute(statements.INSERT_ROW, [ledger_row(record, draft.text)])
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
        self._heads.forget(session_id)
        return True

    def expired_ids(self, now: datetime) -> list[str]:
        query = (
            sa.select(sessions.c.id)
            .where(sessions.c.expires_at < now, sessions.c.deleted_at.is_(None))
            .order_by(sessions.c.expires_at, sessions.c.id)
        )
        with self._engine.connect() as conn:
            return list(conn.execute(query).scalars())


_ERASE = (
    ledger.update()
    .where(
        ledger.c.session_id == sa.bindparam("sid", type_=sa.Text),
        ledger.c.kind.in_(sorted(kind.value for kind in ERASABLE)),
        ledger.c.payload.is_not(None),
    )
    .values(payload=None)
)


def _erase_payloads(conn: sa.Connection, dialect: str, session_id: str) -> None:
    """Null the session's erasable payloads inside `conn`'s transaction, on the one path
    `ledger_guard` lets through: the transaction names the session first (PostgreSQL: a setting
    local to it; MariaDB/MySQL: a user variable, cleared on the way out whatever happens, as it
    outlives the transaction on its pooled connection)."""
    sid = {"sid": session_id}
    if dialect == "mysql":
        conn.execute(sa.text("SET @sessionledger_erasing = :sid"), sid)
        try:
            conn.execute(_ERASE, sid)
        finally:
            conn.execute(sa.text("SET @sessionledger_erasing = NULL"))
        return
    if dialect == "postgresql":
        conn.execute(sa.select(sa.func.set_config("sessionledger.erasing", session_id, True)))
    conn.execute(_ERASE, sid)
