"""The audit port (`domain.audit_port`) of the in-memory ledger: a snapshot is a copy of each
session's records and stored fields, taken under the ledger's lock, so nothing written after it
is seen (by another thread or by this one). Payload digests are `domain.ledger.canonical`'s text
hashed: the rule the SQL ledger's stored text was written by."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sessionledger.domain.audit_port import (
    END,
    Heads,
    Moved,
    RowHash,
    SessionRecords,
    StoredSession,
    Trusted,
)
from sessionledger.domain.hashing import canonical, sha256_hex

if TYPE_CHECKING:
    from sessionledger.domain.records import LedgerRecord


class MemoryAuditSnapshot:
    """`AuditSnapshot` over `sessions`: each session's records (by position) and what is stored
    for it, in the ledger's order of sessions, as they were when the snapshot was taken."""

    def __init__(self, sessions: Mapping[str, tuple[Sequence[LedgerRecord], StoredSession]]) -> None:
        self._sessions = sessions

    def session_ids(self) -> list[str]:
        return list(self._sessions)

    def stored(self, session_ids: Sequence[str] | None = None) -> Iterator[StoredSession]:
        wanted = self._sessions if session_ids is None else dict.fromkeys(session_ids)
        for session_id in wanted:
            if session_id in self._sessions:
                yield self._sessions[session_id][1]

    def records(self, session_id: str, after: int = 0, upto: int = END) -> SessionRecords:
        kept = self._sessions.get(session_id)
        records = [] if kept is None else [r for r in kept[0] if after < r.position <= upto]
        return _hashed(records)

    def top(self) -> int:
        return max((records[-1].global_position or 0 for records, _ in self._sessions.values()), default=0)

    def row_hashes(self) -> Iterator[RowHash]:
        for session_id in sorted(self._sessions):
            for record in self._sessions[session_id][0]:
                yield RowHash(session_id, record.row_hash, record.global_position)

    def appended(self, after: int) -> tuple[list[str], Iterator[tuple[str, SessionRecords]]]:
        found = {
            session_id: new
            for session_id in sorted(self._sessions)
            if (new := [r for r in self._sessions[session_id][0] if (r.global_position or 0) > after])
        }
        return list(found), ((session_id, _hashed(new)) for session_id, new in found.items())

    @contextmanager
    def heads_sent(self, trusted: Trusted, written: Sequence[str]) -> Iterator[Callable[[], Heads]]:
        moved: dict[str, Moved] = {}
        for session_id, position, head, _ in zip(*trusted, strict=True):
            kept = self._sessions.get(session_id)
            now = None if kept is None else _at(kept[0], position)
            row_head = None if kept is None else kept[1].head
            if now != head or row_head != (position, head):
                moved[session_id] = Moved(now, row_head)
        touched = {sid: self._sessions[sid][1].head for sid in written if sid in self._sessions}
        yield lambda: (moved, touched)

    def last_positions(self, session_ids: Iterable[str]) -> dict[str, int]:
        return {
            session_id: records[-1].position
            for session_id in session_ids
            if session_id in self._sessions and (records := self._sessions[session_id][0])
        }


def _at(records: Sequence[LedgerRecord], position: int) -> str | None:
    """The row hash of the record at `position` (`None`: none there)."""
    if 0 < position <= len(records) and records[position - 1].position == position:
        return records[position - 1].row_hash
    return next((r.row_hash for r in records if r.position == position), None)


def _hashed(records: list[LedgerRecord]) -> SessionRecords:
    return SessionRecords(
        records, [None if r.payload is None else sha256_hex(canonical(r.payload)) for r in records]
    )
