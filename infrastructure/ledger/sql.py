"""`SqlLedger`: the ledger on PostgreSQL or SQLite, one code path through SQLAlchemy Core.

It implements the `Ledger` port by handing each call to the module with that one job: sessions
(`sessions.py`), state scopes (`state.py`), appends (`appends.py`), event reads (`events.py`),
the active window (`window.py`), compactions and rewinds (`window_changes.py`), adapters'
entries (`entries.py`) and the audit reads (`audit_reads.py`). Their SQL is `statements.py`; the
chain heads they share are cached in `heads.py`. Each module's docstring says which data-access
layer it uses: a SQLAlchemy Core `Connection`, or, on the hot paths, the same Core statements run
on the driver (`driver.py`).
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
from sessionledger.infrastructure.ledger.appends import Appends
from sessionledger.infrastructure.ledger.audit_reads import AuditReads
from sessionledger.infrastructure.ledger.driver import Autocommit
from sessionledger.infrastructure.ledger.entries import EntryReads
from sessionledger.infrastructure.ledger.events import EventReads
from sessionledger.infrastructure.ledger.heads import HeadCache
from sessionledger.infrastructure.ledger.sessions import Sessions
from sessionledger.infrastructure.ledger.state import StateScopes
from sessionledger.infrastructure.ledger.text_index import TextIndexer
from sessionledger.infrastructure.ledger.window import WindowReads
from sessionledger.infrastructure.ledger.window_changes import WindowChanges, WindowPrefix

if TYPE_CHECKING:
    from sessionledger.domain.audit_port import AuditSnapshot
    from sessionledger.domain.compaction import CompactionResult
    from sessionledger.infrastructure.ledger.async_append import AsyncAppend

T = TypeVar("T")


class SqlLedger:
    """The durable ledger; safe to share between threads, and between processes on one database."""

    def __init__(self, engine: sa.Engine, *, index_in_background: bool = False) -> None:
        """`index_in_background`: keep PostgreSQL's keyword index up on a thread of this process
        (`TextIndexer`); the composition root asks for it in the processes that write."""
        self._engine = engine
        self._autocommit = Autocommit(engine)
        heads = HeadCache()
        state = StateScopes(engine)
        prefix = WindowPrefix(engine.dialect)
        self._sessions = Sessions(engine, self._autocommit, heads, state, prefix)
        self._state = state
        self._appends = Appends(engine, self._autocommit, heads, state)
        self._window = WindowReads(engine, self._autocommit)
        self._events = EventReads(engine, self._window)
        self._changes = WindowChanges(engine, heads, prefix)
        self._entries = EntryReads(engine, self._autocommit)
        self._audit = AuditReads(engine)
        self._indexer = TextIndexer(engine) if engine.dialect.name == "postgresql" else None
        if self._indexer is not None and index_in_background:
            self._indexer.start()

    @property
    def engine(self) -> sa.Engine:
        return self._engine

    @property
    def autocommit(self) -> Autocommit:
        """The ledger's autocommitted driver connections, for a one-statement read beside its own
        (an access token's, at every request of the HTTP servers); closed with the ledger."""
        return self._autocommit

    def async_append(self, statement_timeout: float, connections: int) -> AsyncAppend | None:
        """The common append from an event loop without a thread (`async_append.py`), on PostgreSQL,
        MariaDB and MySQL, on up to `connections` connections of the loop's own."""
        from sessionledger.infrastructure.ledger.async_append import AsyncAppend, loop_driver

        driver = loop_driver(self._engine, statement_timeout)
        return None if driver is None else AsyncAppend(self._appends, driver, connections)

    def index_text(self) -> int:
        """Bring the keyword index up to every session's head now (PostgreSQL; SQLite's is always
        in step), waiting for an indexer at work; the rows indexed. Tests and benchmarks call it
        to measure a search over an index in step; in use an indexer thread does it."""
        return 0 if self._indexer is None else self._indexer.run_once(wait=True, paced=False)

    def close(self) -> None:
        if self._indexer is not None:
            self._indexer.close()
        self._autocommit.close()
        self._engine.dispose()

    # sessions
    def create_session(self, session: Session, state: Mapping[str, Any]) -> None:
        self._sessions.create(session, state)

    def get_session(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def list_sessions(self, user_id: str, app_name: str | None) -> list[Session]:
        return self._sessions.listed(user_id, app_name)

    def recent_sessions(self, app_name: str | None, limit: int, offset: int) -> list[Session]:
        return self._sessions.listed(None, app_name, newest_first=True, limit=limit, offset=offset)

    def delete_session(self, session_id: str, reason: str) -> bool:
        return self._sessions.delete(session_id, reason)

    def expired_session_ids(self, now: datetime) -> list[str]:
        return self._sessions.expired_ids(now)

    # events
    def append(self, drafts: Sequence[Draft], tally: Tally | None = None) -> list[AppendOutcome]:
        return self._appends.append(drafts, tally)

    def events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        return self._events.events(session_id, filter)

    def messages(self, session_id: str) -> list[Message]:
        return self._window.messages(session_id)

    def payloads(self, session_id: str, build: Callable[[Mapping[str, Any]], T]) -> list[T]:
        return self._window.payloads(session_id, build)

    def version(self, session_id: str) -> int:
        return self._sessions.version(session_id)

    def window(self, session_id: str) -> Window | None:
        return self._window.window(session_id)

    def window_stats(self, session_id: str) -> WindowStats | None:
        return self._window.stats(session_id)

    def fill_token_counts(self, session_id: str, counter: TokenCounter) -> int:
        return self._window.fill_token_counts(session_id, counter)

    # adapters' entries
    def entries(
        self, session_id: str, types: Sequence[str], prefix: str, after: int, limit: int | None
    ) -> list[StoredEntry]:
        return self._entries.entries(session_id, types, prefix, after, limit)

    def entry_log(self, session_id: str, types: Sequence[str], prefix: str, after: int) -> list[EntryRow]:
        return self._entries.entry_log(session_id, types, prefix, after)

    # window changes
    def apply_compaction(
        self, read: Window, result: CompactionResult, source: str, tally: Tally | None = None
    ) -> int | None:
        return self._changes.apply_compaction(read, result, source, tally)

    def apply_rewind(self, session_id: str, before_invocation_id: str) -> int:
        return self._changes.apply_rewind(session_id, before_invocation_id)

    # state
    def app_state(self, app_name: str) -> Mapping[str, Any]:
        return self._state.app_state(app_name)

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]:
        return self._state.user_state(app_name, user_id)

    # audit and relay
    def audit_snapshot(self) -> AbstractContextManager[AuditSnapshot]:
        return self._audit.snapshot()

    @property
    def readable_from_forks(self) -> bool:
        return True

    def after_fork(self) -> None:
        self._audit.after_fork()  # no indexer: a forked reader (verify's) writes nothing

    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        return self._audit.records(session_id)

    def session_ids(self) -> list[str]:
        return self._audit.session_ids()

    def restore(self, restored: RestoredSession) -> None:
        self._sessions.restore(restored)

    def tail(self, after: int, limit: int) -> list[TailRow]:
        return self._audit.tail(after, limit)
