"""The ports: what the domain needs from the outside world, as small protocols.

Adapters in `infrastructure` implement them; unit tests implement them with fakes. The values
they pass live in modules of their own (`window`, `window_stats`, `append_outcomes`, `records`),
which import no port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sessionledger.domain.audit_port import AuditLedger

if TYPE_CHECKING:
    import threading
    from contextlib import AbstractContextManager

    from sessionledger.domain.access import StoredToken
    from sessionledger.domain.append_outcomes import AppendOutcome, Tally
    from sessionledger.domain.compaction.result import CompactionResult
    from sessionledger.domain.entries import EntryRow, StoredEntry
    from sessionledger.domain.events import SessionEvent
    from sessionledger.domain.filters import EventFilter
    from sessionledger.domain.messages import Message
    from sessionledger.domain.records import Draft, LedgerRecord, TailRow
    from sessionledger.domain.restore import RestoredSession
    from sessionledger.domain.sessions import Session
    from sessionledger.domain.tokens import TokenCounter
    from sessionledger.domain.window import Window, WindowStats

T = TypeVar("T")


class Ledger(AuditLedger, Protocol):
    """The append-only session ledger plus its window projection (one per backend); audit reads it
    through its `AuditLedger` port (`domain.audit_port`).

    Every backend keeps the same rules (`domain.records`, `domain.hashing`, `domain.window`,
    `domain.window_stats`): records and hashes, the window rule, window stats. The service
    validates input; a ledger trusts what it is given.
    """

    # sessions
    def create_session(self, session: Session, state: Mapping[str, Any]) -> None:
        """Store a new session and its `created` record; `SessionExists` if the id exists or was deleted.

        `state` is the initial state with prefixes and without `temp:` keys; `app:`/`user:` keys
        go to the shared scopes, the rest is the session's own.
        """

    def get_session(self, session_id: str) -> Session | None:
        """A live session with its merged state; `None` when unknown or deleted."""

    def list_sessions(self, user_id: str, app_name: str | None) -> list[Session]:
        """The user's live sessions, oldest first."""

    def recent_sessions(self, app_name: str | None, limit: int, offset: int) -> list[Session]:
        """Every user's live sessions, newest first (the reverse of `list_sessions`' order): at
        most `limit` of them after skipping `offset`."""

    def delete_session(self, session_id: str, reason: str) -> bool:
        """Record an erasure and erase the session's payloads; False when there was nothing to delete."""

    def expired_session_ids(self, now: datetime) -> list[str]:
        """Live sessions with `expires_at < now`."""

    # events
    def append(self, drafts: Sequence[Draft], tally: Tally | None = None) -> list[AppendOutcome]:
        """Append event drafts (any sessions, in order) in one transaction: the batch ingest path.

        Idempotent per `(session, event id)`, including within the batch; each session's events
        keep their order and get dense positions. One outcome per draft, in order; an unknown
        or deleted session is an outcome, never an exception, so one bad event cannot block a batch.
        The outcomes are added to `tally`'s counters in the same transaction.
        """

    def events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The filtered events in log order (archived, then the window); `[]` for unknown sessions."""

    def messages(self, session_id: str) -> list[Message]:
        """The active window's messages in order (`events` of `EventFilter.active()`, without the
        events around them: the read before every prompt); `[]` for unknown sessions."""

    def payloads(self, session_id: str, build: Callable[[Mapping[str, Any]], T]) -> list[T]:
        """`build(payload)` of each of the active window's event payloads, in order
        (`event_to_payload`'s JSON objects: the message and metadata as stored, for a reader that
        rebuilds its own items from them without building events); `[]` for unknown sessions."""

    def version(self, session_id: str) -> int:
        """The session's event version; 0 when unknown or deleted."""

    def window(self, session_id: str) -> Window | None:
        """The active window and its head, read consistently; `None` when unknown or deleted."""

    def window_stats(self, session_id: str) -> WindowStats | None: ...

    def fill_token_counts(self, session_id: str, counter: TokenCounter) -> int:
        """Count and store the tokens of window events not yet counted; returns how many."""

    # adapters' entries (`domain.entries`); appended through `append` as `entry_draft`s and `forgotten_draft`s
    def entries(
        self, session_id: str, types: Sequence[str], prefix: str, after: int, limit: int | None
    ) -> list[StoredEntry]:
        """The session's live entries of `types` whose key starts with `prefix`, at positions
        after `after`, newest first, at most `limit` (`domain.entries.live_entries`); `[]` for
        unknown or deleted sessions."""

    def entry_log(self, session_id: str, types: Sequence[str], prefix: str, after: int) -> list[EntryRow]:
        """The session's entry records of `types` under `prefix`, forget records and erasure
        (`domain.entries.entry_log_row`) after position `after`, oldest first: what a reader that
        keeps a session's live entries applies to catch up. `[]` for an unknown session."""

    # window changes (compare-and-swap on the window epoch)
    def apply_compaction(
        self, read: Window, result: CompactionResult, source: str, tally: Tally | None = None
    ) -> int | None:
        """Write a compaction if the window epoch is still `read.head.epoch`; the new version or None.

        Events appended since the read keep following the new window. `SessionNotFound` when the
        session is gone. A written compaction is added to `tally`'s counters in the same transaction.
        """

    def apply_rewind(self, session_id: str, before_invocation_id: str) -> int:
        """Hide the window's events from that invocation on; `LookupError` if it is not in the window."""

    # state
    def app_state(self, app_name: str) -> Mapping[str, Any]: ...

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]: ...

    # audit and relay
    def records(self, session_id: str) -> Iterator[LedgerRecord]:
        """Every ledger row of the session, by position, including erased ones."""

    def session_ids(self) -> Iterable[str]:
        """Every session the ledger has records for, deleted ones included."""

    def restore(self, restored: RestoredSession) -> None:
        """Store a session made elsewhere (an import): its records verbatim, with the projection
        they define; `SessionExists` when the ledger has (or had) a session with that id."""

    def tail(self, after: int, limit: int) -> list[TailRow]:
        """Ledger rows with `global_position > after`, in that order, at most `limit`.

        Gap-aware rule for tailers: global positions are assigned at insert and committed out
        of order, and a rolled-back insert (a duplicate event id) leaves a permanent hole. A
        tailer must not move its offset past a missing position until that position has been
        missing for longer than any write transaction takes (e.g. a few seconds); before that
        it re-reads from the hole on its next poll.
        """

    def close(self) -> None: ...


# --- what the workers keep beside the ledger --------------------------------------------------


class LeaseStore(Protocol):
    """Compaction leases: one compaction per session at a time, with no lock held across the LLM call.

    A lease is claimed on a live session only, and for a while: a worker that dies leaves a lease
    that expires on its own. The owner is the compaction task's id, so the same task delivered
    again takes its own lease back at once.
    """

    def claim(self, session_id: str, owner: str, seconds: float, now: datetime | None = None) -> bool:
        """True when `owner` now holds the session's lease (free, expired, or already its own)."""

    def release(self, session_id: str, owner: str) -> None:
        """Give the lease back, if `owner` still holds it."""

    def holder(self, session_id: str, now: datetime | None = None) -> str | None:
        """Who holds an unexpired lease on the live session, if anyone."""


class RelayPositions(Protocol):
    """How far each relay has read the ledger's global order, kept beside the ledger.

    A relay that restarts resumes where it stopped instead of waking every session again. One
    relay of a name leads a deployment at a time; the others wait as standbys (`leadership`).
    """

    def load(self, name: str) -> int:
        """The stored global position; 0 when that relay never saved one."""

    def save(self, name: str, position: int) -> None:
        """Move the position forward (never back: two relays racing cannot rewind it)."""

    def lag(self, name: str) -> int:
        """Ledger rows after the stored position: what that relay has not handled yet."""

    def leadership(
        self, name: str, stop: threading.Event, standing_by: Callable[[], None] | None = None
    ) -> AbstractContextManager[bool]:
        """Lead the relays of that name for the duration of the block, waiting until no other
        relay does (calling `standing_by` once when it starts to wait, so that its operator
        knows why it does nothing); yields False when `stop` is set first. Without a way to see
        other relays (SQLite, memory) every relay leads."""


class CounterStore(Protocol):
    """Named totals that every worker process adds to (events ingested, compactions run, ...).

    The work of every process and container adds up in one place that an operator reads. What a
    ledger write does is counted by that write, in its transaction (`Tally`); the rest (an
    evaluation, a failure, a dead letter) is added here by the process as it happens.
    """

    def add(self, deltas: Mapping[str, int]) -> None:
        """Add each delta to its counter's total, atomically against other processes."""

    def totals(self) -> dict[str, int]:
        """Every stored total; a counter never added to is absent."""


class RedeliveryCounts(Protocol):
    """How often the broker delivered a message again after losing the worker that had it.

    Counted across workers, by message id, so a message that kills its worker every time can be
    given up after a bound instead of coming back for ever.
    """

    def count(self, message_id: str) -> int:
        """Count one more redelivery of the message; how many there have been."""

    def forget(self, message_id: str) -> None:
        """Drop the message's count (it was handled, or given up); nothing to forget is fine."""


class AccessTokens(Protocol):
    """The tokens that open the audit page, kept beside the ledger (`domain.access`): a token's
    secret is stored only as its hash, and a revoked token is kept (revoked) but never found."""

    def add(self, token: StoredToken) -> None:
        """Store a new token."""

    def find(self, token_id: str) -> StoredToken | None:
        """The token with that id, unless there is none or it was revoked."""

    def revoke(self, token_id: str) -> bool:
        """Revoke the token; False when there is no such token or it was revoked already."""
