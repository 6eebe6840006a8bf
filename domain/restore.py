"""A session as its ledger records define it, for storing records made elsewhere (an import).

Appends always make new records; an import brings records that already have their positions,
versions and hashes. Every backend stores them verbatim (`Ledger.restore`) with the projection
worked out here once, from the same rules replay uses, so no backend derives it on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sessionledger.domain.codec import parse_timestamp
from sessionledger.domain.ids import check_new_id
from sessionledger.domain.ledger import LedgerRecord, Projection, replay, window_stats
from sessionledger.domain.ports import WindowStats
from sessionledger.domain.sessions import Session


@dataclass(frozen=True, slots=True)
class RestoredSession:
    """The session row the records define (metadata, state and window in `projection`, stats)
    and the records themselves, by position."""

    session: Session
    records: Sequence[LedgerRecord]
    projection: Projection
    stats: WindowStats

    @property
    def head(self) -> LedgerRecord:
        return self.records[-1]


def restored_session(records: Sequence[LedgerRecord]) -> RestoredSession:
    """The session of verified records of a live session, its first record the `created` one.

    Its ids become new ids of this store: `ValueError` for one no backend could store.
    """
    created = records[0].payload or {}
    expires_at = created["expires_at"]
    session = Session(
        id=records[0].session_id,
        user_id=created["user_id"],
        app_name=created["app_name"],
        created_at=parse_timestamp(created["created_at"]),
        expires_at=None if expires_at is None else parse_timestamp(expires_at),
        metadata=created["metadata"],
    )
    check_new_id(session.id, "session_id")
    check_new_id(session.user_id, "user_id")
    check_new_id(session.app_name, "app_name")
    projection = replay(records)
    counts = {record.position: record.token_count for record in records}
    stats = window_stats(
        (event, counts[p]) for p, event in zip(projection.window_positions, projection.window, strict=True)
    )
    return RestoredSession(session, records, projection, stats)
