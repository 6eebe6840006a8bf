"""`MemoryLedger`: the ledger in process memory, with the SQL ledger's semantics.

It keeps the same records (the same drafts, hashes and window rule from `domain.records`, `domain.window`), so
`verify` and `replay` work on it too. One lock guards everything: it is for tests, demos and
single-process use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import count
from threading import RLock
from typing import TYPE_CHECKING, Any, TypeVar

from sessionledger.domain.append_outcomes import AppendOutcome, Tally
from sessionledger.domain.audit_port import StoredSession
from sessionledger.domain.codec import event_to_payload
from sessionledger.domain.entries import EntryRow, StoredEntry, entry_log_row, entry_row, live_entries
from sessionledger.domain.errors import SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.hashing import GENESIS_HASH
from sessionledger.domain.messages import Message
from sessionledger.domain.records import (
    ERASABLE,
    Draft,
    Kind,
    LedgerRecord,
    TailRow,
    created_draft,
    erasure_draft,
)
from sessionledger.domain.rewind import plan_rewind
from sessionledger.domain.sessions import Session, merge_state, split_state_delta
from sessionledger.domain.tokens import TokenCounter
from sessionledger.domain.turns import format_event
from sessionledger.domain.window import Window, WindowHead, WindowShape, WindowStats
from sessionledger.domain.window_stats import window_stats
from sessionledger.domain.write_plans import (
    BatchSession,
    LedgerHead,
    batch_keys,
    batch_session_ids,
    plan_batch,
    plan_compaction,
)
from sessionledger.infrastructure.ledger.counters import MemoryCounterStore
from sessionledger.infrastructure.ledger.memory_audit import MemoryAuditSnapshot

if TYPE_CHECKING:
    from sessionledger.domain.compaction import CompactionResult
    from sessionledger.domain.restore import RestoredSession

T = TypeVar("T")


@dataclass
class _SessionLog:
    """One session: its row (as the SQL `sessions` table has it) and its records."""

    session: Session  # metadata only; state is kept in `state`
    state: dict[str, Any]
    records: list[LedgerRecord] = field(default_factory=list)
    events: dict[int, SessionEvent] = field(default_factory=dict)  # position -> event
    positions: dict[str, int] = field(default_factory=dict)  # event id -> position: the ids taken
    token_counts: dict[int, int] = field(default_factory=dict)
    shape: WindowShape = field(default_factory=WindowShape)
    epoch: int = 0
    version: int = 0
    stats: WindowStats = field(default_factory=WindowStats)
    deleted_at: datetime | None = None

    @property
    def head(self) -> LedgerHead:
        return LedgerHead.of(self.records[-1])

    def add(self, draft: Draft, version: int, global_position: int) -> LedgerRecord:
        placed = self.head.place(self.session.id, draft, version, datetime.now(UTC))
        return self.keep(placed, draft, global_position)

    def keep(self, record: LedgerRecord, draft: Draft, global_position: int) -> LedgerRecord:
        """Store a record placed after the head (from `draft`, which says whether it holds an event)."""
        record = replace(record, global_position=global_position)
        self.records.append(record)
        if draft.event is not None:
            self.events[record.position] = draft.event
            self.positions[draft.event.id] = record.position
        return record

    def batch_session(self) -> BatchSession:
        return BatchSession(self.head, self.stats, self.state, self.session.app_name, self.session.user_id)

    def split(self) -> tuple[list[int], list[int]]:
        return self.shape.split(self.events)

    def counted(self) -> list[LedgerRecord]:
        """The records, each with its token count once one is filled in."""
        counts = self.token_counts
        return [
            replace(r, token_count=counts[r.position]) if r.position in counts else r for r in self.records
        ]

    def stored(self) -> StoredSession:
        """What the SQL ledger's session row and window slots would hold (the audit port's view)."""
        s, head = self.session, self.records[-1]
        return StoredSession(
            s.id, self.version, (head.position, head.row_hash), self.deleted_at is not None,
            s.user_id, s.app_name, dict(s.metadata), s.created_at, s.expires_at, dict(self.state),
            self.shape.base, tuple(self.shape.prefix), frozenset(self.shape.hidden), self.stats,
        )  # fmt: skip


class MemoryLedger:
    """A fresh, empty in-memory ledger; thread-safe. `counters` are the workers' counters beside
    it, which its writes add their tallies to under its lock."""

    def __init__(self) -> None:
        self.counters = MemoryCounterStore()
        self._lock = RLock()
        self._sessions: dict[str, _SessionLog] = {}
        self._app_states: dict[str, dict[str, Any]] = {}
        self._user_states: dict[tuple[str, str], dict[str, Any]] = {}
        self._global = count(1)

    def close(self) -> None:
        """Nothing to release; the store lives as long as the object."""

    def _live(self, session_id: str) -> _SessionLog | None:
        log = self._sessions.get(session_id)
        return None if log is None or log.deleted_at is not None else log

    # --- sessions ---------------------------------------------------------------------------

    def create_session(self, session: Session, state: Mapping[str, Any]) -> None:
        draft = created_draft(session, state)
        scopes = split_state_delta(state)
        with self._lock:
            if session.id in self._sessions:
                raise SessionExists.taken(session.id)
            record = replace(
                draft.place(session.id, 1, 0, GENESIS_HASH, datetime.now(UTC)),
                global_position=next(self._global),
            )
            self._sessions[session.id] = _SessionLog(
                replace(session, state={}), dict(scopes.session), records=[record]
            )
            self._merge_shared(
                {session.app_name: scopes.app}, {(session.app_name, session.user_id): scopes.user}
            )

    def get_session(self, session_id: str) -> Session | None:
        with self._lock:
            log = self._live(session_id)
            return None if log is None else self._view(log)

    def _view(self, log: _SessionLog) -> Session:
        s = log.session
        app = self._app_states.get(s.app_name, {})
        user = self._user_states.get((s.app_name, s.user_id), {})
        return replace(s, state=merge_state(log.state, app, user))

    def list_sessions(self, user_id: str, app_name: str | None) -> list[Session]:
        return self._listed(user_id, app_name)

    def recent_sessions(self, app_name: str | None, limit: int, offset: int) -> list[Session]:
        return self._listed(None, app_name, newest_first=True, page=slice(offset, offset + limit))

    def _listed(
        self,
        user_id: str | None,
        app_name: str | None,
        *,
        newest_first: bool = False,
        page: slice = slice(None),
    ) -> list[Session]:
        """Live sessions (of `user_id` when given) in creation order, or newest first; `page` of them."""
        with self._lock:
            found = [
                log
                for log in self._sessions.values()
                if log.deleted_at is None
                and (user_id is None or log.session.user_id == user_id)
                and (app_name is None or log.session.app_name == app_name)
            ]
            found.sort(
                key=lambda log: (log.session.created_at, log.records[0].global_position), reverse=newest_first
            )
            return [self._view(log) for log in found[page]]

    def delete_session(self, session_id: str, reason: str) -> bool:
        now = datetime.now(UTC)
        with self._lock:
            log = self._live(session_id)
            if log is None:
                return False
            log.records = [replace(r, payload=None) if r.kind in ERASABLE else r for r in log.records]
            log.add(erasure_draft(at=now, reason=reason), log.version, next(self._global))
            log.events.clear()
            log.state = {}
            log.session = replace(log.session, metadata={})
            log.shape = WindowShape()
            log.stats = WindowStats()
            log.deleted_at = now
            return True

    def expired_session_ids(self, now: datetime) -> list[str]:
        with self._lock:
            expired = [
                log.session
                for log in self._sessions.values()
                if log.deleted_at is None
                and log.session.expires_at is not None
                and log.session.expires_at < now
            ]
        return [s.id for s in sorted(expired, key=lambda s: (s.expires_at, s.id))]

    # --- appends ----------------------------------------------------------------------------

    def append(self, drafts: Sequence[Draft], tally: Tally | None = None) -> list[AppendOutcome]:
        """See `domain.ports.Ledger.append`: `domain.write_plans.plan_batch`, under one lock."""
        keys = batch_keys(drafts)
        with self._lock:
            logs = {sid: log for sid in batch_session_ids(drafts) if (log := self._live(sid)) is not None}
            taken = {(sid, eid) for sid, eid in keys if sid in logs and eid in logs[sid].positions}
            plan = plan_batch(
                drafts, {sid: log.batch_session() for sid, log in logs.items()}, taken, datetime.now(UTC)
            )
            for record, draft in plan.appended:
                logs[record.session_id].keep(record, draft, next(self._global))
            for sid, session in plan.sessions.items():
                log = logs[sid]
                log.version, log.stats, log.state = session.head.version, session.stats, session.state
            self._merge_shared(plan.app_states, plan.user_states)
            if tally is not None:
                self.counters.add(tally.of_append(plan.outcomes))
        return plan.outcomes

    # --- reads ------------------------------------------------------------------------------

    def _ordered(self, log: _SessionLog) -> list[tuple[int, SessionEvent]]:
        """Every readable event in log order (archived flagged), with its position."""
        archived, window = log.split()
        return [(p, log.events[p].with_archived()) for p in archived] + [(p, log.events[p]) for p in window]

    def events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        with self._lock:
            log = self._live(session_id)
            if log is None:
                return []
            ordered = [event for _, event in self._ordered(log)]
        return filter.select(ordered)

    def messages(self, session_id: str) -> list[Message]:
        return [event.message for event in self.events(session_id, EventFilter.active())]

    def payloads(self, session_id: str, build: Callable[[Mapping[str, Any]], T]) -> list[T]:
        return [build(event_to_payload(event)) for event in self.events(session_id, EventFilter.active())]

    def version(self, session_id: str) -> int:
        with self._lock:
            log = self._live(session_id)
            return 0 if log is None else log.version

    def window(self, session_id: str) -> Window | None:
        with self._lock:
            log = self._live(session_id)
            if log is None:
                return None
            _, positions = log.split()
            head = max([*positions, log.shape.base])  # the base never moves back (see window.py)
            return Window(
                WindowHead(log.version, log.epoch, head),
                tuple(log.events[p] for p in positions),
                tuple(positions),
                log.stats,
                tuple(log.token_counts.get(p) for p in positions),
            )

    def window_stats(self, session_id: str) -> WindowStats | None:
        with self._lock:
            log = self._live(session_id)
            return None if log is None else log.stats

    def fill_token_counts(self, session_id: str, counter: TokenCounter) -> int:
        with self._lock:
            log = self._live(session_id)
            if log is None:
                return 0
            todo = [p for p in log.split()[1] if p not in log.token_counts]
            for position in todo:
                log.token_counts[position] = counter(format_event(log.events[position]))
            log.stats = self._stats(log)
            return len(todo)

    def _stats(self, log: _SessionLog) -> WindowStats:
        return window_stats((log.events[p], log.token_counts.get(p)) for p in log.split()[1])

    # --- adapters' entries ------------------------------------------------------------------

    def entries(
        self, session_id: str, types: Sequence[str], prefix: str, after: int, limit: int | None
    ) -> list[StoredEntry]:
        with self._lock:
            log = self._live(session_id)
            records = [] if log is None else log.records
            rows = [
                entry_row(r.position, r.recorded_at or r.occurred_at, r.kind, r.payload)
                for r in reversed(records)
                if r.payload is not None
                and r.position > after
                and (
                    r.kind is Kind.FORGOTTEN
                    or (r.kind is Kind.ENTRY and r.event_type in types and str(r.branch).startswith(prefix))
                )
            ]  # the rows the SQL ledger selects (`entries.entries_query`)
        return list(live_entries(rows, types, prefix, limit))

    def entry_log(self, session_id: str, types: Sequence[str], prefix: str, after: int) -> list[EntryRow]:
        with self._lock:
            log = self._sessions.get(session_id)  # a deleted one too: its erasure is in the log
            return [
                entry_log_row(r.position, r.recorded_at or r.occurred_at, r.kind, r.payload)
                for r in ([] if log is None else log.records)
                if r.position > after
                and r.payload is not None
                and (
                    r.kind in (Kind.FORGOTTEN, Kind.ERASURE)
                    or (r.kind is Kind.ENTRY and r.event_type in types and str(r.branch).startswith(prefix))
                )
            ]  # the rows the SQL ledger selects (`entries.entry_log_query`)

    # --- window changes ---------------------------------------------------------------------

    def apply_compaction(
        self, read: Window, result: CompactionResult, source: str, tally: Tally | None = None
    ) -> int | None:
        if not read.events:
            return None
        session_id = read.events[0].session_id
        with self._lock:
            log = self._live(session_id)
            if log is None:
                raise SessionNotFound(f"session {session_id!r} not found")
            if log.epoch != read.head.epoch:
                return None
            plan = plan_compaction(
                read, result, log.head, at=datetime.now(UTC), source=source, taken=log.positions
            )
            for record, draft in plan.written:
                log.keep(record, draft, next(self._global))
            log.shape.compact(plan.record.payload or {})
            log.version = plan.head.version
            log.epoch += 1
            log.stats = self._stats(log)
            if tally is not None:
                self.counters.add(tally.of_compaction())
            return log.version

    def apply_rewind(self, session_id: str, before_invocation_id: str) -> int:
        with self._lock:
            log = self._live(session_id)
            if log is None:
                raise SessionNotFound(f"session {session_id!r} not found")
            draft = plan_rewind(log.records, before_invocation_id, datetime.now(UTC))
            log.version += 1
            record = log.add(draft, log.version, next(self._global))
            log.shape.rewind(draft.payload, record.position)
            log.state.update(draft.payload["state_delta"])
            log.epoch += 1
            log.stats = self._stats(log)
            return log.version

    # --- state ------------------------------------------------------------------------------

    def app_state(self, app_name: str) -> Mapping[str, Any]:
        with self._lock:
            return dict(self._app_states.get(app_name, {}))

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]:
        with self._lock:
            return dict(self._user_states.get((app_name, user_id), {}))

    def _merge_shared(
        self, apps: Mapping[str, dict[str, Any]], users: Mapping[tuple[str, str], dict[str, Any]]
    ) -> None:
        """Shallow per-key merge of state deltas into the app and the (app, user) scopes."""
        for app_name, delta in apps.items():
            if delta:
                self._app_states.setdefault(app_name, {}).update(delta)
        for key, delta in users.items():
            if delta:
                self._user_states.setdefault(key, {}).update(delta)

    # --- audit and relay --------------------------------------------------------------------

    @contextmanager
    def audit_snapshot(self) -> Iterator[MemoryAuditSnapshot]:
        """Every session's records and stored fields, copied under the lock (`memory_audit.py`)."""
        with self._lock:
            frozen = {sid: (log.counted(), log.stored()) for sid, log in self._sessions.items()}
        yield MemoryAuditSnapshot(frozen)

    @property
    def readable_from_forks(self) -> bool:
        return False  # a forked process would read a copy of the parent's memory, not the ledger

    def after_fork(self) -> None:
        """Nothing to forget: no forked process reads this ledger."""

    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        with self._lock:
            log = self._sessions.get(session_id)
            return iter(() if log is None else log.counted())

    def session_ids(self) -> list[str]:
        with self._lock:
            return list(self._sessions)

    def restore(self, restored: RestoredSession) -> None:
        session, records = restored.session, restored.records
        now = datetime.now(UTC)
        events = [r for r in records if r.kind is Kind.EVENT and r.payload is not None]
        with self._lock:
            if session.id in self._sessions:
                raise SessionExists.taken(session.id)
            self._sessions[session.id] = _SessionLog(
                session=replace(session, state={}),
                state=dict(restored.projection.session_state),
                records=[
                    replace(
                        r,
                        recorded_at=r.recorded_at or now,
                        global_position=next(self._global),
                        token_count=None,
                    )
                    for r in records
                ],
                events={r.position: r.event() for r in events},
                positions={r.event_id or "": r.position for r in events},
                token_counts={r.position: r.token_count for r in events if r.token_count is not None},
                shape=restored.projection.shape,
                epoch=restored.projection.epoch,
                version=restored.head.version,
                stats=restored.stats,
            )
            self._merge_shared(
                {session.app_name: dict(restored.app_state)},
                {(session.app_name, session.user_id): dict(restored.user_state)},
            )

    def tail(self, after: int, limit: int) -> list[TailRow]:
        with self._lock:
            rows = [
                TailRow(r.global_position or 0, r.session_id, log.session.app_name, r.kind.value)
                for log in self._sessions.values()
                for r in log.records
                if (r.global_position or 0) > after
            ]
        rows.sort(key=lambda row: row.global_position)
        return rows[:limit]
