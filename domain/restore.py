"""A session as its ledger records define it, for storing records made elsewhere (an import).

Appends always make new records; an import brings records that already have their positions,
versions and hashes. Every backend stores them verbatim (`Ledger.restore`) with the projection
worked out here once, from the same rules replay uses, so no backend derives it on its own. The
records' `app:` and `user:` state is merged into the app and user scopes as their appends would
have merged it, so that those scopes stay the fold of the ledger's shared writes (`verify`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessionledger.domain.codec import parse_timestamp
from sessionledger.domain.ids import check_new_id
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.replay import Projection, replay
from sessionledger.domain.sessions import Session, StateDelta, split_state_delta
from sessionledger.domain.window import WindowStats
from sessionledger.domain.window_stats import window_stats


@dataclass(frozen=True, slots=True)
class RestoredSession:
    """The session row the records define (metadata, state and window in `projection`, stats)
    and the records themselves, by position."""

    session: Session
    records: Sequence[LedgerRecord]
    projection: Projection
    stats: WindowStats
    app_state: Mapping[str, Any] = field(default_factory=dict)
    """The `app:` keys the records write, folded in order (merged into the app scope)."""
    user_state: Mapping[str, Any] = field(default_factory=dict)
    """The `user:` keys the records write, folded in order (merged into the user scope)."""

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
    app_state: dict[str, Any] = {}
    user_state: dict[str, Any] = {}
    for _, delta in shared_writes(records):
        app_state.update(delta.app)
        user_state.update(delta.user)
    return RestoredSession(session, records, projection, stats, app_state, user_state)


def shared_writes(records: Iterable[LedgerRecord]) -> Iterable[tuple[LedgerRecord, StateDelta]]:
    """The records that write `app:` or `user:` state (the created record's initial state, an
    event's state delta; rewinds never touch those scopes), with what they write. Erased records
    are left out: what they wrote is gone with their payload."""
    for record in records:
        if record.payload is None or record.kind not in (Kind.CREATED, Kind.EVENT):
            continue
        delta = split_state_delta(
            record.payload.get("state" if record.kind is Kind.CREATED else "state_delta")
        )
        if delta.app or delta.user:
            yield record, delta
