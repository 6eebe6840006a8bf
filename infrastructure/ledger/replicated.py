"""`ReplicatedLedger`: the `Ledger` port on a PostgreSQL primary with streaming replicas.

Appends, version checks, compactions, the window and every read a write depends on stay on the
primary. The reads that tolerate lag go to a replica (`replicas.py`): audit snapshots (verify,
digests, proofs, `verify --since`), the list of session ids, the session lists (the audit page's,
cross-session recall's) and searches. Each still sees this process's own writes (the replica must
have replayed them, else the read goes to the primary). A process that only reads (`reading=True`,
the reading commands) also reads whole sessions' records there (export, replay, timeline).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sessionledger.domain.append_outcomes import AppendOutcome, Tally
from sessionledger.domain.entries import EntryRow, StoredEntry
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.messages import Message
from sessionledger.domain.records import Draft, LedgerRecord, TailRow
from sessionledger.domain.restore import RestoredSession
from sessionledger.domain.sessions import Session
from sessionledger.domain.tokens import TokenCounter
from sessionledger.domain.window import Window, WindowStats

if TYPE_CHECKING:
    from sessionledger.domain.audit_port import AuditSnapshot
    from sessionledger.domain.compaction import CompactionResult
    from sessionledger.infrastructure.ledger.async_append import AsyncAppend
    from sessionledger.infrastructure.ledger.replicas import ReadReplicas

__all__ = ["ReplicatedLedger"]

T = TypeVar("T")


def is_search(filter: EventFilter) -> bool:
    """A filter that searches the log's text (keyword, keywords, pattern): a scan, lag-tolerant."""
    return bool(filter.keyword or filter.keywords or filter.pattern is not None)


class ReplicatedLedger:
    """The ledger on a primary, its lag-tolerant reads on replicas; safe to share between threads."""

    def __init__(self, replicas: ReadReplicas, *, reading: bool = False) -> None:
        self._replicas = replicas
        self._primary = replicas.primary
        self._fence = replicas.fence
        self._reading = reading

    @property
    def engine(self) -> sa.Engine:
        """The primary's engine (the workers' stores live there)."""
        return self._primary.engine

    def async_append(self, statement_timeout: float, connections: int) -> AsyncAppend | None:
        """The primary's append from an event loop: its writes do not pass here, so from now on
        every replica read asks the primary how far it has written."""
        fast = self._primary.async_append(statement_timeout, connections)
        if fast is not None:
            self._fence.follow_every_write()
        return fast

    def close(self) -> None:
        self._replicas.close()
        self._primary.close()

    def _written(self, write: Callable[[], T]) -> T:
        """`write()` on the primary, then the fence moved: moved before, a read racing with the
        write could ask the primary's position ahead of its commit and clear the mark, and this
        process's next read would take a replica without the write (one that raised may have
        committed too)."""
        try:
            return write()
        finally:
            self._fence.wrote()

    # sessions
    def create_session(self, session: Session, state: Mapping[str, Any]) -> None:
        self._written(lambda: self._primary.create_session(session, state))

    def get_session(self, session_id: str) -> Session | None:
        return self._primary.get_session(session_id)

    def list_sessions(self, user_id: str, app_name: str | None) -> list[Session]:
        return self._replicas.read(lambda ledger: ledger.list_sessions(user_id, app_name))

    def recent_sessions(self, app_name: str | None, limit: int, offset: int) -> list[Session]:
        return self._replicas.read(lambda ledger: ledger.recent_sessions(app_name, limit, offset))

    def delete_session(self, session_id: str, reason: str) -> bool:
        return self._written(lambda: self._primary.delete_session(session_id, reason))

    def expired_session_ids(self, now: datetime) -> list[str]:
        return self._primary.expired_session_ids(now)

    # events
    def append(self, drafts: Sequence[Draft], tally: Tally | None = None) -> list[AppendOutcome]:
        return self._written(lambda: self._primary.append(drafts, tally))

    def events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        if is_search(filter):
            return self._replicas.read(lambda ledger: ledger.events(session_id, filter))
        return self._primary.events(session_id, filter)

    def messages(self, session_id: str) -> list[Message]:
        return self._primary.messages(session_id)

    def payloads(self, session_id: str, build: Callable[[Mapping[str, Any]], T]) -> list[T]:
        return self._primary.payloads(session_id, build)

    def version(self, session_id: str) -> int:
        return self._primary.version(session_id)

    def window(self, session_id: str) -> Window | None:
        return self._primary.window(session_id)

    def window_stats(self, session_id: str) -> WindowStats | None:
        return self._primary.window_stats(session_id)

    def fill_token_counts(self, session_id: str, counter: TokenCounter) -> int:
        return self._primary.fill_token_counts(session_id, counter)

    # adapters' entries
    def entries(
        self, session_id: str, types: Sequence[str], prefix: str, after: int, limit: int | None
    ) -> list[StoredEntry]:
        return self._primary.entries(session_id, types, prefix, after, limit)

    def entry_log(self, session_id: str, types: Sequence[str], prefix: str, after: int) -> list[EntryRow]:
        return self._primary.entry_log(session_id, types, prefix, after)

    # window changes
    def apply_compaction(
        self, read: Window, result: CompactionResult, source: str, tally: Tally | None = None
    ) -> int | None:
        return self._written(lambda: self._primary.apply_compaction(read, result, source, tally))

    def apply_rewind(self, session_id: str, before_invocation_id: str) -> int:
        return self._written(lambda: self._primary.apply_rewind(session_id, before_invocation_id))

    # state
    def app_state(self, app_name: str) -> Mapping[str, Any]:
        return self._primary.app_state(app_name)

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]:
        return self._primary.user_state(app_name, user_id)

    # audit and relay
    def audit_snapshot(self) -> AbstractContextManager[AuditSnapshot]:
        return self._replicas.entered(lambda ledger: ledger.audit_snapshot())

    @property
    def readable_from_forks(self) -> bool:
        return True

    def after_fork(self) -> None:
        self._replicas.after_fork()

    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        """On a replica in a reading process only: a writer's own checks (an adapter's staleness
        check) read records to see other processes' writes, which a replica may not have yet."""
        if self._reading:
            return self._replicas.read(lambda ledger: ledger.records(session_id))
        return self._primary.records(session_id)

    def session_ids(self) -> list[str]:
        return self._replicas.read(lambda ledger: ledger.session_ids())

    def restore(self, restored: RestoredSession) -> None:
        self._written(lambda: self._primary.restore(restored))

    def tail(self, after: int, limit: int) -> list[TailRow]:
        return self._primary.tail(after, limit)
