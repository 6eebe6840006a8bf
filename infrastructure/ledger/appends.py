"""Appends: one event (an agent's `append_event`) and a batch (the workers' ingest).

One event runs on the driver (`driver.py`): the append is the hottest path, where SQLAlchemy's
per-execution layer costs more than the database does. On PostgreSQL it is one autocommitted
statement (`statements.APPEND_ROW`), on SQLite two in one transaction; an append with a state
delta also updates state rows, in a Core transaction around the same driver statements. A batch
runs on a Core `Connection`: one transaction per hundreds of events, with lists of ids expanded
into `IN`, so SQLAlchemy's cost is paid once per batch, and its rows are planned by
`domain.write_plans.plan_batch` as the memory ledger's are; the rows go in through the driver in
one round trip (`driver.BulkInsert`: COPY on PostgreSQL, executemany on SQLite). Both ask
`domain.write_plans.version_check` whether a conditional append holds, at the head they move.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.append_outcomes import AppendOutcome, Tally
from sessionledger.domain.errors import ConcurrencyConflict
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.records import ADAPTER_KINDS, Draft, Kind, LedgerRecord
from sessionledger.domain.sessions import split_state_delta
from sessionledger.domain.turns import starts_turn
from sessionledger.domain.window import WindowStats
from sessionledger.domain.window_stats import event_bytes
from sessionledger.domain.write_plans import (
    BatchPlan,
    BatchSession,
    LedgerHead,
    appended_event,
    batch_keys,
    batch_session_ids,
    plan_batch,
    version_check,
)
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.counters import add_counts
from sessionledger.infrastructure.ledger.driver import (
    Autocommit,
    BulkInsert,
    DriverStatement,
    Packet,
    Procedure,
    compiled,
    driver_of,
    integrity_errors,
    write_transaction,
)
from sessionledger.infrastructure.ledger.engine import WRITE
from sessionledger.infrastructure.ledger.heads import HeadCache
from sessionledger.infrastructure.ledger.rows import head_of, ledger_row, stats_columns, stats_of
from sessionledger.infrastructure.ledger.schema import ledger, mysql_collation
from sessionledger.infrastructure.ledger.state import StateScopes

NO_STATS = WindowStats()
"""The stats an on-head append plans from: what the plan leaves is then their growth."""


def _growth(stats: WindowStats) -> dict[str, int]:
    """The `add_<stat>` values of `statements.append_rows` that grow a session's stats by `stats`."""
    columns = stats_columns(stats)
    return {added: columns[name] for name, added in statements.ADDED}


NO_GROWTH = _growth(NO_STATS)
"""The stats' growth by an append of entries alone (no event): none, the common adapter append."""

RowsOnHead = Callable[[Any, Mapping[str, Any]], int]
"""Writes a session's rows from its cached head on a driver connection in autocommit, returning
the rows inserted (`Appends._rows_on_head`)."""


@dataclass(frozen=True)
class _RowsForms:
    """How `Appends._append_on_head` writes a number of rows in one round trip: its statement
    (PostgreSQL) or packet (MariaDB/MySQL), the synchronous path's writer of it, and its row
    parameters (`statements.row_parameters`)."""

    one: DriverStatement | None
    packet: Packet | None
    write: RowsOnHead
    parameters: tuple[tuple[int, str, str], ...]


MAX_HEAD_RACES = 1000
"""How often a one-event append re-reads a head that moved before it gives up."""


@dataclass(slots=True)
class OneStatement:
    """An append's one autocommitted statement (MariaDB/MySQL: one packet, or the call of a
    procedure), ready to run: its SQL, the driver's parameters, its session and the head it leaves
    there, the `rows` it inserts, which of its results (in order) counts the rows inserted: `rows`
    when the head moved and the rows went in, 0 when the head had moved on, how many results it
    sends (a packet's: `Packet.results`), and whether it is a `driver.Procedure`'s call, whose one
    result counts nothing: the rows went in unless it signalled that the head did not move. Not
    frozen, as nothing changes it: a frozen dataclass cost five times as much to make, on every
    append from the loop."""

    sql: str
    params: Mapping[str, Any] | tuple[Any, ...]
    session_id: str
    head: LedgerHead
    rows: int = 1
    counted: int = 0
    results: int = 1
    procedure: bool = False


@dataclass(slots=True)
class OnHead:
    """An adapter's append planned from its session's cached head (`Appends.on_head`): the values
    of its one round trip, how it writes its rows, how many, the head it leaves, and the drafts'
    outcomes once those rows are in (not frozen: `OneStatement`)."""

    session_id: str
    values: dict[str, Any]
    forms: _RowsForms
    rows: int
    head: LedgerHead
    outcomes: list[AppendOutcome]


def head_moves(event: SessionEvent) -> dict[str, Any]:
    """What an event adds to its session row's window stats."""
    return {
        "turn": int(starts_turn(event)),
        "size": event_bytes(event),
        "keep_count": 0 if event.is_synthetic else 1,
    }


def statement_values(
    draft: Draft, head: LedgerHead, moves: dict[str, Any]
) -> tuple[LedgerRecord, dict[str, Any]]:
    """The draft's record after `head`, and the values of the statement that moves the head from
    there and inserts the record (`head_moves` of its event): the one-event append's, also built
    by bench_ledger to time that statement alone."""
    record = head.place(appended_event(draft).session_id, draft, head.version + 1, datetime.now(UTC))
    return record, {**moves, "cached": head.position, **ledger_row(record, draft.text)}


def _appended_on_head(draft: Draft) -> bool:
    """Whether `Appends._append_on_head` can append the draft: no conditional append, and no
    event that moves state or ends the window's run of events since its summary."""
    event = draft.event
    return draft.expected_version is None and (event is None or not (event.state_delta or event.is_synthetic))


def _libpq(statement: DriverStatement) -> RowsOnHead:
    """`statement` sent through libpq itself (`libpq_statement.py`): psycopg's, so imported only
    when a PostgreSQL ledger is opened, once, by its `Appends`."""
    from sessionledger.infrastructure.ledger.libpq_statement import LibpqStatement

    libpq = LibpqStatement(statement.sql)
    return lambda connection, values: libpq.execute(connection, statement.bound(values))


def _statement(
    one: DriverStatement | None,
    packet: Packet | Procedure | None,
    values: Mapping[str, Any],
    session_id: str,
    head: LedgerHead,
    rows: int,
) -> OneStatement | None:
    """The append `one` (PostgreSQL) or `packet` (MariaDB/MySQL: a packet or a procedure's call)
    makes with `values`, ready to run."""
    if one is not None:
        return OneStatement(one.sql, one.params(values), session_id, head, rows)
    if isinstance(packet, Procedure):
        return OneStatement(packet.sql, packet.params(values), session_id, head, rows, procedure=True)
    if packet is not None:
        params = packet.params(values)
        return OneStatement(packet.sql, params, session_id, head, rows, packet.last_result, packet.results)
    return None


def _last_count(packet: Packet) -> RowsOnHead:
    """A packet's writer: the row count of its last statement."""
    return lambda connection, values: packet.execute(connection, values)[-1]


def _one_statement_forms(
    head_moved: sa.Update, dialect: sa.Dialect, procedure: str
) -> tuple[DriverStatement | None, Procedure | None]:
    """The one-event append over `head_moved` (a `statements.move_head`), in the one round trip its
    database allows: one statement on PostgreSQL (DML in a CTE, atomic on its own, so it runs in
    autocommit), the call of a procedure named after `procedure` on MariaDB/MySQL
    (`driver.Procedure`: the head move, then the row); neither on SQLite."""
    if dialect.name == "postgresql":
        return compiled(statements.append_row(head_moved), dialect), None
    if dialect.name == "mysql":
        moved_then_inserted = [
            compiled(head_moved, dialect),
            compiled(statements.INSERT_ROW, dialect, statements.ROW_COLUMNS),
        ]
        return None, Procedure(procedure, moved_then_inserted, dialect, mysql_collation(dialect))
    return None, None


_ONE_EVENT = (
    (statements.MOVE_HEAD, "sessionledger_append"),
    (statements.move_head(statements.TOKEN_LIVE), "sessionledger_token_append"),
)
"""The one-event append's head moves, and the names of their procedures: the common one, and one
made for a remembered access token, which must still be live (`Appends.one_statement`)."""


def create_procedures(engine: sa.Engine) -> None:
    """Create the one-event appends' procedures a MariaDB or MySQL database lacks
    (`driver.Procedure`); the composition root calls it when it opens a ledger to write."""
    with engine.begin() as connection:
        for head_moved, name in _ONE_EVENT:
            _, procedure = _one_statement_forms(head_moved, engine.dialect, name)
            if procedure is not None:
                procedure.create(connection)


class Appends:
    """The append paths of one database, moving the heads in `heads`."""

    def __init__(
        self, engine: sa.Engine, autocommit: Autocommit, heads: HeadCache, state: StateScopes
    ) -> None:
        self._engine = engine
        self._autocommit = autocommit
        self._writer = engine.execution_options(**{WRITE: True})
        self._postgres = engine.dialect.name == "postgresql"
        self._heads = heads
        self._state = state
        self._move_head = compiled(statements.MOVE_HEAD, engine.dialect)
        self._insert_row = compiled(statements.INSERT_ROW, engine.dialect, statements.ROW_COLUMNS)
        self._bulk_rows = BulkInsert(ledger, engine.dialect, statements.ROW_COLUMNS)
        self._batch_heads = compiled(statements.BATCH_HEADS, engine.dialect)
        self._head = compiled(statements.HEAD, engine.dialect)
        common, token = (_one_statement_forms(moved, engine.dialect, name) for moved, name in _ONE_EVENT)
        self._append_row, self._append_call = common
        self._append_libpq = None if self._append_row is None else _libpq(self._append_row)
        self._token_append = token  # the same, for a remembered access token (`one_statement`)
        self._append_rows: dict[int, _RowsForms] = {}  # by row count: `_rows_on_head`
        self._integrity_errors = integrity_errors(engine.dialect)

    def append(self, drafts: Sequence[Draft], tally: Tally | None = None) -> list[AppendOutcome]:
        """See `domain.ports.Ledger.append`: one transaction per call (a counted event takes the
        batch path, whose transaction also holds the counters)."""
        if len(drafts) == 1 and tally is None and drafts[0].kind is Kind.EVENT:
            return [self._append_one(drafts[0])]
        if not drafts:
            return []
        if tally is None:
            outcomes = self._append_on_head(drafts)
            if outcomes is not None:
                return outcomes
        return self._append_batch(drafts, tally)

    def _append_on_head(self, drafts: Sequence[Draft]) -> list[AppendOutcome] | None:
        """An adapter's append (its entries and new messages, one session) in one autocommitted
        round trip from the session's cached head, as a one-event append is (`_rows_on_head`: the
        batch path's four round trips cost an adapter's put three times the peers' one); `None`
        (nothing written) for any append `on_head` cannot plan, or that meets a duplicate or a
        head that moved, which the batch path then makes."""
        session_id = self._on_head_session(drafts)
        if session_id is None:
            return None
        head = self._heads.get(session_id) or self._read_head(session_id)
        planned = None if head is None else self._planned_on_head(session_id, head, drafts)
        if planned is None:
            return None
        try:
            with self._autocommit() as connection:
                stored = planned.forms.write(connection, planned.values) == planned.rows
        except self._integrity_errors:  # a message id the session holds: the batch path sorts it out
            stored = False
        self._landed(planned.session_id, planned.head if stored else None)
        return planned.outcomes if stored else None

    def on_head(self, drafts: Sequence[Draft]) -> OnHead | None:
        """An adapter's append planned from the session's cached head, by `plan_batch` from that
        head and empty stats, whose result is then the stats' growth: additive for events with no
        state delta, none synthetic. For `on_head_statement`'s caller, which runs it on a
        connection of its own (`_append_on_head` plans alike, reading a head the cache lacks).
        `None` when it cannot be planned so: SQLite, no
        adapter's entry, several sessions, more than `ON_HEAD_ROWS` rows, no cached head, a
        conditional append, a state delta, a synthetic event, or an event id the plan refuses."""
        session_id = self._on_head_session(drafts)
        if session_id is None:
            return None
        head = self._heads.get(session_id)
        return None if head is None else self._planned_on_head(session_id, head, drafts)

    def _on_head_session(self, drafts: Sequence[Draft]) -> str | None:
        """The one session of an append `on_head` can plan, given the session's head."""
        if self._append_row is None and self._append_call is None:  # SQLite: no one round trip
            return None
        if len(drafts) > statements.ON_HEAD_ROWS or not any(d.kind in ADAPTER_KINDS for d in drafts):
            return None
        session_ids = batch_session_ids(drafts)
        if len(session_ids) != 1 or not all(map(_appended_on_head, drafts)):
            return None
        return session_ids[0]

    def _planned_on_head(self, sid: str, head: LedgerHead, drafts: Sequence[Draft]) -> OnHead | None:
        """`on_head` for the drafts of session `sid`, from `head`."""
        plan = plan_batch(drafts, {sid: BatchSession(head, NO_STATS, {}, "", "")}, (), datetime.now(UTC))
        if any(outcome is not AppendOutcome.STORED for outcome in plan.outcomes):
            return None
        moved = plan.sessions[sid]
        rows = [ledger_row(record, draft.text) for record, draft in plan.appended]
        values: dict[str, Any] = {
            "sid": sid,
            "cached": head.position,
            "new_version": moved.head.version,
            "new_position": moved.head.position,
            "new_hash": moved.head.hash,
            **(NO_GROWTH if moved.stats is NO_STATS else _growth(moved.stats)),
        }
        forms = self._rows_on_head(len(rows))
        values.update({parameter: rows[n][column] for n, column, parameter in forms.parameters})
        return OnHead(sid, values, forms, len(rows), moved.head, plan.outcomes)

    def on_head_statement(self, drafts: Sequence[Draft]) -> tuple[OneStatement, list[AppendOutcome]] | None:
        """An adapter's append (`on_head`) as its one statement, for a caller that runs it on a
        connection of its own (`async_append.py`), and the drafts' outcomes once it has moved the
        head; `None` when `on_head` cannot plan it, for `append` to make."""
        planned = self.on_head(drafts)
        if planned is None:
            return None
        forms = planned.forms
        statement = _statement(
            forms.one, forms.packet, planned.values, planned.session_id, planned.head, planned.rows
        )
        return None if statement is None else (statement, planned.outcomes)

    def _rows_on_head(self, count: int) -> _RowsForms:
        """How `count` rows go in from a cached head in one round trip, made once per row count:
        `statements.append_rows` on PostgreSQL, written through libpq; `MOVE_BY` then
        `insert_rows_if_moved` as one packet on MariaDB/MySQL. Either writer returns the rows
        inserted (none when the head had moved)."""
        forms = self._append_rows.get(count)
        if forms is None:
            dialect = self._engine.dialect
            parameters = statements.row_parameters(count)
            if self._postgres:
                one = compiled(statements.append_rows(count), dialect)
                forms = _RowsForms(one, None, _libpq(one), parameters)
            else:
                packet = Packet([statements.MOVE_BY, statements.insert_rows_if_moved(count)], dialect)
                forms = _RowsForms(None, packet, _last_count(packet), parameters)
            self._append_rows[count] = forms
        return forms

    def _append_one(self, draft: Draft) -> AppendOutcome:
        """Move the cached head and insert the row, atomically.

        The head moves only from the cached position; when it moved elsewhere (an append, a
        compaction, a deletion) nothing is written and the head is re-read and the append
        retried. An INSERT that violates UNIQUE(session_id, event_id) is the idempotent
        duplicate: the event id rule of `domain.write_plans`, kept by the index.
        """
        event = appended_event(draft)
        session_id = event.session_id
        scopes = split_state_delta(event.state_delta) if event.state_delta else None
        moves = head_moves(event)
        for _ in range(MAX_HEAD_RACES):
            cached = self._heads.get(session_id)
            head = cached or self._read_head(session_id)
            if head is None:
                return AppendOutcome.NO_SESSION
            conflict = version_check(draft, head.version)
            if conflict is not None:
                if cached is None:
                    return conflict
                self._heads.forget(session_id)  # the cache may be behind another process: re-read
                continue
            record, values = statement_values(draft, head, moves)
            try:
                if scopes is not None and any(scopes):
                    with self._writer.begin() as conn:
                        moved = self._move_and_insert(
                            driver_of(conn.connection),
                            values,
                            lambda: self._state.merge_delta(conn, session_id, scopes),
                        )
                elif self._append_libpq is not None:
                    with self._autocommit() as connection:
                        moved = self._append_libpq(connection, values) == 1
                elif self._append_call is not None:
                    with self._autocommit() as connection:
                        moved = self._append_call.execute(connection, values)
                else:
                    with write_transaction(self._engine) as driver:
                        moved = self._move_and_insert(driver, values)
            except self._integrity_errors:
                self._heads.forget(session_id)
                if self._has_event(session_id, event.id):
                    return AppendOutcome.DUPLICATE
                continue  # someone else took the position: re-read the head and retry
            if moved:
                self._heads.keep(session_id, LedgerHead.of(record))
                return AppendOutcome.STORED
            self._heads.forget(session_id)  # the head moved: re-read it and retry
        raise ConcurrencyConflict(f"append to {session_id!r} lost {MAX_HEAD_RACES} races for the ledger head")

    def _read_head(self, session_id: str) -> LedgerHead | None:
        """A live session's head as committed, kept in the cache; `None` for an unknown or deleted
        session. Read on the ledger's autocommitted connection, the one the append then takes: a
        pooled connection of its own opened a second connection to the server in a ledger opened
        per request (a LangGraph checkpointer in a `with` block), 4-5 ms of its first put."""
        with self._autocommit() as driver:
            found = self._head.rows(driver.cursor(), {"sid": session_id})
        if not found:
            return None
        head = head_of(found[0])
        self._heads.keep(session_id, head)
        return head

    def one_statement(self, draft: Draft, live_token: str | None = None) -> OneStatement | None:
        """The common append as its one statement, for a caller that runs it on a connection of its
        own (`async_append.py`): a PostgreSQL, MariaDB or MySQL ledger, a cached head at the
        expected version, no state delta. `None` for every other append, which only `append` makes.
        With `live_token` (an access token's id), the statement also moves the head only while that
        token is not revoked (`statements.TOKEN_LIVE`): a revoked token's append stores nothing."""
        event = appended_event(draft)
        one, call = (self._append_row, self._append_call) if live_token is None else self._token_append
        if (one is None and call is None) or any(split_state_delta(event.state_delta)):
            return None
        head = self._heads.get(event.session_id)
        if head is None or version_check(draft, head.version) is not None:
            return None
        record, values = statement_values(draft, head, head_moves(event))
        if live_token is not None:
            values["token_id"] = live_token
        return _statement(one, call, values, event.session_id, LedgerHead.of(record), 1)

    def ran(self, statement: OneStatement, moved: bool) -> None:
        """What a `one_statement` or `on_head_statement` that ran did to the head: moved it (kept),
        or not (forgotten: the next append re-reads it)."""
        self._landed(statement.session_id, statement.head if moved else None)

    def _landed(self, session_id: str, head: LedgerHead | None) -> None:
        """The session's head after an append from its cached head: `head` where the append moved
        it, else (`None`: the head had moved on, or it is unknown whether the append landed)
        forgotten, so that the next append re-reads it."""
        if head is None:
            self._heads.forget(session_id)
        else:
            self._heads.keep(session_id, head)

    def _move_and_insert(
        self, driver: Any, values: dict[str, Any], merge_state: Callable[[], None] | None = None
    ) -> bool:
        """Move the head, then, if it moved, merge the state delta and insert the row (inside the
        caller's transaction). The state first: the app and user state row locks it takes then
        order the ledger rows' global positions as they order the merges, so that those scopes
        are the fold of the ledger's writes by global position (`verify` recomputes it)."""
        move = driver.cursor()
        self._move_head.execute(move, values)
        if move.rowcount != 1:
            return False
        if merge_state is not None:
            merge_state()
        self._insert_row.execute(driver.cursor(), values)
        return True

    def _has_event(self, session_id: str, event_id: str) -> bool:
        with self._engine.connect() as conn:
            return conn.execute(statements.taken_event_ids([session_id], [event_id])).first() is not None

    def _append_batch(self, drafts: Sequence[Draft], tally: Tally | None) -> list[AppendOutcome]:
        """Under the batch's session row locks (taken in id order: no deadlock between batches),
        the app and user state merges, the plan's rows in one COPY (SQLite: executemany), the
        heads in one executemany UPDATE and, last (the counter rows are locked until the commit),
        the tally's counters.

        The first try plans the batch as if none of its event ids were stored: the ledger's
        UNIQUE(session_id, event_id) is the check, and a batch that meets a stored id (a message
        delivered again) is rolled back and planned again with the ids read from it. A query for
        stored ids in every batch cost more than the rest of the transaction's statements together.
        """
        keys = batch_keys(drafts)
        session_ids = batch_session_ids(drafts)
        try:
            plan = self._write_batch(drafts, session_ids, keys, tally, read_taken=False)
        except self._integrity_errors:
            plan = self._write_batch(drafts, session_ids, keys, tally, read_taken=True)
        for sid, session in plan.sessions.items():
            self._heads.keep(sid, session.head)
        return plan.outcomes

    def _write_batch(
        self,
        drafts: Sequence[Draft],
        session_ids: list[str],
        keys: list[tuple[str, str]],
        tally: Tally | None,
        *,
        read_taken: bool,
    ) -> BatchPlan:
        with self._writer.begin() as conn:
            locked = conn.execute(statements.LOCK_BATCH_SESSIONS, {"sids": session_ids})
            now = datetime.now(UTC)  # under the lock: a later batch of these sessions records a later time
            live = {
                row.id: BatchSession(head_of(row), stats_of(row), row.state, row.app_name, row.user_id)
                for row in locked
            }
            taken = self._taken(conn, list(live), keys) if read_taken and live and keys else set()
            plan = plan_batch(drafts, live, taken, now)
            if plan.appended:
                self._state.merge_shared(conn, plan.app_states, plan.user_states)  # first: `_move_and_insert`
                driver = driver_of(conn.connection)
                self._bulk_rows.write(
                    driver, [ledger_row(record, draft.text) for record, draft in plan.appended]
                )
                driver.cursor().executemany(
                    self._batch_heads.sql,
                    [
                        self._batch_heads.params(
                            {
                                "sid": sid,
                                "new_version": session.head.version,
                                "new_position": session.head.position,
                                "new_hash": session.head.hash,
                                "new_state": session.state,
                                **{
                                    f"new_{name}": value
                                    for name, value in stats_columns(session.stats).items()
                                },
                            }
                        )
                        for sid, session in plan.sessions.items()
                    ],
                )
            if tally is not None:
                add_counts(conn, tally.of_append(plan.outcomes))
        return plan

    def _taken(
        self, conn: sa.Connection, session_ids: list[str], keys: list[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """The batch's `(session id, event id)` pairs its ledger already holds."""
        if self._postgres:
            # psycopg prepares repeated statements; a generic plan of this check (hundreds of ids in
            # an IN list) turned into a filter over the whole session once autoanalyze saw a large
            # session: 0.3 s -> 8 s per batch at 68,000 events.
            conn.execute(sa.text("SET LOCAL plan_cache_mode = force_custom_plan"))
        rows = conn.execute(statements.taken_event_ids(session_ids, sorted({eid for _, eid in keys})))
        return {(row.session_id, row.event_id) for row in rows}
