"""The audit port: what verify, digests, `verify --since` and `verify --jobs` read of a ledger.

Audit reads differ from the service's: whole sessions of 100,000 records, every session at once,
and always in one snapshot, so that what is compared (the chain, the head the session row names,
the stored window) was all true at the same moment. A ledger offers them beside the `Ledger`
port through `AuditLedger.audit_snapshot()`; each backend implements them once (the SQL ledger
on its driver, the in-memory one from its logs), and audit has one code path for all of them.
The values returned are plain: audit compares them, it never reads a backend's tables itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from sessionledger.domain.records import LedgerRecord
    from sessionledger.domain.window import WindowStats

END = 2**62
"""A position past any session's last: `records(..., upto=END)` reads to the end."""


class SessionRecords(NamedTuple):
    """A session's records by position, and the sha256 (hex) of each one's payload as stored
    (`None`: erased). As two lists, because that is how the chain check takes them, and a tuple
    per record would cost the long sessions audit reads."""

    records: list[LedgerRecord]
    digests: list[str | None]


class RowHash(NamedTuple):
    """One record as a digest commits to it: its session, row hash and global position."""

    session_id: str
    row_hash: str
    global_position: int | None


@dataclass(frozen=True, slots=True)
class StoredSession:
    """What a backend stores for a session apart from its records (the SQL `sessions` row and
    its window slots): verify compares it with what the records replay to.

    `head` is the (position, row hash) the row names as the session's last record; `prefix` the
    window's ordered prefix, `window_base` and `hidden` the rest of its shape (so the stored window
    is `WindowShape(prefix, window_base, hidden).split(event positions)`)."""

    session_id: str
    version: int
    head: tuple[int, str]
    deleted: bool
    user_id: str
    app_name: str
    metadata: Mapping[str, Any]
    created_at: datetime
    expires_at: datetime | None
    state: Mapping[str, Any]
    window_base: int
    prefix: tuple[int, ...]
    hidden: frozenset[int]
    stats: WindowStats


class Trusted(NamedTuple):
    """The heads a trusted digest saw, as columns (one entry per session, in the same order): the
    sessions, each head's position and row hash, and its global position (`None`: not recorded, a
    digest of an older release). Columns, because that is what a statement binds them as."""

    sids: Sequence[str]
    positions: Sequence[int]
    heads: Sequence[str]
    globals: Sequence[int | None]


class Moved(NamedTuple):
    """A session whose record at a trusted head, or whose session row, is not that head any more:
    the row hash now at the head's position (`None`: no record there), and the head the session
    row names (`None`: no session row)."""

    row_hash: str | None
    head: tuple[int, str] | None


Heads = tuple[dict[str, Moved], dict[str, tuple[int, str]]]
"""The trusted heads that moved, and the head (position, row hash) each session row names of the
sessions written to since (no entry: no session row)."""


class AuditSnapshot(Protocol):
    """Reads that all see the ledger at one point in time: a write committed after the snapshot
    opened is seen by none of them."""

    def session_ids(self) -> list[str]:
        """Every session the ledger has records for, deleted ones included (as `Ledger.session_ids`)."""

    def stored(self, session_ids: Sequence[str] | None = None) -> Iterator[StoredSession]:
        """What is stored for the sessions (default: every session, each once), in no set order;
        a session without a session row is left out. `verify --jobs` shares them out."""

    def records(self, session_id: str, after: int = 0, upto: int = END) -> SessionRecords:
        """The session's records at positions after `after` up to `upto` (none: an unknown session)."""

    def top(self) -> int:
        """The highest global position of any record (0: an empty ledger)."""

    def row_hashes(self) -> Iterable[RowHash]:
        """Every record's row hash, by session id, then by position: what a digest commits to."""

    def appended(self, after: int) -> tuple[list[str], Iterator[tuple[str, SessionRecords]]]:
        """The sessions with records after global position `after`, and (made as they are iterated)
        each one's records written after it: a cost that follows the records written since."""

    def heads_sent(
        self, trusted: Trusted, written: Sequence[str]
    ) -> AbstractContextManager[Callable[[], Heads]]:
        """Of the trusted heads, those whose record or session row is not that head any more; and
        the heads of the sessions `written` to: asked on entry, collected by calling what this
        yields, so a backend may answer while the caller works (enter it after `appended`)."""

    def last_positions(self, session_ids: Iterable[str]) -> dict[str, int]:
        """The last position each session has records up to (no entry: no records)."""


class AuditLedger(Protocol):
    """A ledger audit can read: snapshots, and whether forked processes may read it too."""

    def audit_snapshot(self) -> AbstractContextManager[AuditSnapshot]:
        """A snapshot to read in (close it soon: on a database it is an open transaction)."""

    @property
    def readable_from_forks(self) -> bool:
        """Whether a forked process may open snapshots of this ledger (after `after_fork`): a
        database may be, memory is the parent's alone. `verify --jobs` shares work out when it is."""

    def after_fork(self) -> None:
        """In a forked process: forget the parent's connections (without closing them)."""
