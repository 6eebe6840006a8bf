"""`verify`: a session's ledger is intact, and what the backend stores is what the ledger says.

Two checks (docs/api.md "Audit"; docs/architecture.md "Hash chain"), on one snapshot of the session
(`infrastructure.audit.reader`):
- the chain: every record's content hash, row hash, link to its predecessor and dense position,
  and the session head (`infrastructure.audit.chain` names the first break and its kind);
- the projection: the stored active window (positions, in order), the rewound events, the
  session-scoped state, the session's own fields and the window stats equal what
  `domain.replay.replay` rebuilds from the records alone, at the stored version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from sessionledger.domain.errors import SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.hashing import canonical
from sessionledger.domain.ports import Ledger
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.replay import Projection, replay
from sessionledger.domain.window import WindowStats
from sessionledger.domain.window_stats import window_stats
from sessionledger.infrastructure.audit.chain import first_break
from sessionledger.infrastructure.audit.reader import LedgerSnapshot, StoredProjection, read_snapshot
from sessionledger.infrastructure.audit.shared_state import SharedStateFold
from sessionledger.infrastructure.service import SessionService


class Mismatch(StrEnum):
    """Ways the stored projection can differ from the replayed one (the chain's are `BreakKind`)."""

    VERSION = "version"
    WINDOW = "window"
    STATE = "state"
    SESSION = "session"
    STATS = "stats"
    REPLAY = "replay"
    UNREADABLE = "unreadable"


UNREADABLE_ERRORS = (KeyError, TypeError, ValueError, AttributeError)
"""What reading or replaying rows changed outside the ledger raises (a time that is no time, a
field of another type): a finding of the session they belong to, never the end of a `verify`."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: its kind (a `BreakKind` or a `Mismatch`), where (a ledger position), and why."""

    kind: str
    position: int | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "position": self.position, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of verifying one session; `ok` when nothing was found."""

    session_id: str
    records: int
    version: int
    head_hash: str
    deleted: bool
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def first(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "ok": self.ok,
            "records": self.records,
            "version": self.version,
            "head_hash": self.head_hash,
            "deleted": self.deleted,
            "findings": [finding.as_dict() for finding in self.findings],
        }


def verify(service: SessionService, session_id: str, *, user_id: str | None = None) -> Verification:
    """Check one session's chain and stored projection; `SessionNotFound` when it has no records
    (with `user_id`: unless that user owns it, as `SessionService.get_session` says)."""
    if user_id is not None and service.get_session(session_id, user_id=user_id) is None:
        raise SessionNotFound(f"session {session_id!r} not found")
    return _read_and_check(service.ledger, session_id)


def _read_and_check(ledger: Ledger, session_id: str, fold: SharedStateFold | None = None) -> Verification:
    """`check_snapshot` of the session as `ledger` holds it (its records added to `fold`), or an
    `unreadable` one when its rows cannot be read."""
    try:
        snapshot = read_snapshot(ledger, session_id)
    except UNREADABLE_ERRORS as error:
        return unreadable(session_id, error)
    if fold is not None:
        fold.add(snapshot.records)
    return check_snapshot(session_id, snapshot)


def unreadable(session_id: str, error: object) -> Verification:
    """A session some of whose rows cannot be read back: changed outside the ledger."""
    finding = Finding(Mismatch.UNREADABLE, None, f"its rows cannot be read back: {error}")
    return Verification(session_id, 0, 0, "", False, (finding,))


def check_snapshot(session_id: str, snapshot: LedgerSnapshot) -> Verification:
    """`verify` of a session already read (`SessionNotFound` when it has no records)."""
    records = snapshot.records
    if not records:
        raise SessionNotFound(f"session {session_id!r} not found")
    found = first_break(records, snapshot.digests, snapshot.head)
    chain = [] if found is None else [Finding(found.kind, found.position, found.detail)]
    if snapshot.stored is None:
        projection = [Finding(Mismatch.SESSION, None, "the ledger has records but no session row")]
    else:
        projection = _projection_mismatches(snapshot.stored, records)
    return Verification(
        session_id=session_id,
        records=len(records),
        version=records[-1].version,
        head_hash=records[-1].row_hash,
        deleted=any(record.kind is Kind.ERASURE for record in records),
        findings=(*chain, *projection),
    )


def verify_all(service: SessionService, *, user_id: str | None = None) -> Iterator[Verification]:
    """`verify` for every session the ledger has records for, deleted ones included, and of the
    app and user state (`shared_state`); with `user_id`, for that user's sessions only
    (`SessionService.list_sessions`), without the shared state (other users write it too)."""
    if user_id is not None:
        for session in service.list_sessions(user_id):
            yield verify(service, session.id)
        return
    fold = SharedStateFold()
    results = []
    for session_id in service.ledger.session_ids():
        results.append(_read_and_check(service.ledger, session_id, fold))
    yield from with_shared_state(results, fold, service.ledger)


def with_shared_state(
    results: Iterable[Verification], fold: SharedStateFold, ledger: Ledger
) -> Iterator[Verification]:
    """`results` with the shared state's findings added to the sessions they name."""
    found = fold.findings(ledger)
    for result in results:
        extra = found.get(result.session_id)
        if extra:
            shared = (Finding(Mismatch.STATE, position, detail) for position, detail in extra)
            result = replace(result, findings=(*result.findings, *shared))
        yield result


def _projection_mismatches(stored: StoredProjection, records: Sequence[LedgerRecord]) -> list[Finding]:
    by_position = {record.position: record for record in records}
    return projection_mismatches(
        stored,
        deleted=any(record.kind is Kind.ERASURE for record in records),
        created=records[0],
        project=lambda: replay(records, upto_version=stored.version),
        expected_stats=lambda projection: _replayed_stats(projection, by_position),
    )


def projection_mismatches(
    stored: StoredProjection,
    *,
    deleted: bool,
    created: LedgerRecord,
    project: Callable[[], Projection],
    expected_stats: Callable[[Projection], WindowStats],
) -> list[Finding]:
    """The stored projection against the replayed one (`project`, at the stored version) and the
    window stats its window's events give (`expected_stats`); `created` is the first record."""
    if deleted or stored.session is None:
        if deleted and stored.session is None:
            return []
        problem = (
            "the ledger records a deletion but the session is still readable"
            if deleted
            else "the session is not readable but its ledger records no deletion"
        )
        return [Finding(Mismatch.SESSION, None, problem)]
    try:
        projection = project()
    except UNREADABLE_ERRORS as error:
        return [Finding(Mismatch.REPLAY, None, f"the records cannot be replayed: {error!r}")]
    if projection.version != stored.version:
        return [
            Finding(
                Mismatch.VERSION,
                None,
                f"the session is at version {stored.version} but its ledger reaches {projection.version}",
            )
        ]
    findings = [
        *_window_mismatch(stored, projection),
        *_state_mismatch(stored, projection),
        *_session_mismatch(stored, created),
    ]
    if not findings:
        findings += _stats_mismatch(stored, expected_stats(projection))
    return findings


def _window_mismatch(stored: StoredProjection, projection: Projection) -> list[Finding]:
    findings = []
    window, replayed = list(stored.window or ()), list(projection.window_positions)
    if window != replayed:
        index = next(
            (i for i, (a, b) in enumerate(zip(window, replayed, strict=False)) if a != b),
            min(len(window), len(replayed)),
        )
        here = window[index] if index < len(window) else None
        there = replayed[index] if index < len(replayed) else None
        findings.append(
            Finding(
                Mismatch.WINDOW,
                here if here is not None else there,
                f"the stored window ({len(window)} events) differs from the replayed one ({len(replayed)}) "
                f"at index {index}: stored {_at(here)}, replayed {_at(there)}",
            )
        )
    if stored.hidden is not None and stored.hidden != set(projection.hidden):
        differ = sorted(stored.hidden.symmetric_difference(projection.hidden))
        findings.append(
            Finding(
                Mismatch.WINDOW,
                differ[0],
                f"the stored rewound events differ from the replayed ones at {differ}",
            )
        )
    return findings


def _at(position: int | None) -> str:
    return "nothing" if position is None else f"position {position}"


def _state_mismatch(stored: StoredProjection, projection: Projection) -> list[Finding]:
    keys = _differing(stored.state or {}, projection.session_state)
    if not keys:
        return []
    return [
        Finding(Mismatch.STATE, None, f"the stored session state differs from the replayed one on {keys}")
    ]


def _session_mismatch(stored: StoredProjection, created: LedgerRecord) -> list[Finding]:
    """The session row's own fields against the `created` record they were written from."""
    if created.kind is not Kind.CREATED or created.payload is None:
        return [
            Finding(Mismatch.SESSION, created.position, "the ledger does not start with a created record")
        ]
    fields = stored.session or {}
    keys = _differing(fields, {key: created.payload.get(key) for key in fields})
    if not keys:
        return []
    return [
        Finding(
            Mismatch.SESSION, created.position, f"the session row differs from its created record on {keys}"
        )
    ]


def _replayed_stats(projection: Projection, by_position: Mapping[int, LedgerRecord]) -> WindowStats:
    readable = [  # the positions replay made events of (a tampered ledger may name others)
        p
        for p in projection.window_positions
        if (r := by_position.get(p)) is not None and r.kind is Kind.EVENT and r.payload is not None
    ]
    pairs: list[tuple[SessionEvent, int | None]] = [
        (event, by_position[position].token_count)
        for position, event in zip(readable, projection.window, strict=True)
    ]
    return window_stats(pairs)


def _stats_mismatch(stored: StoredProjection, expected: WindowStats) -> list[Finding]:
    if stored.stats is None or expected == stored.stats:
        return []
    return [
        Finding(
            Mismatch.STATS,
            None,
            f"the stored window stats {stored.stats} differ from the replayed {expected}",
        )
    ]


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Keys whose values differ (exactly, as JSON: `1` is not `true`), sorted."""
    return sorted(
        key
        for key in a.keys() | b.keys()
        if key not in a or key not in b or canonical(a[key]) != canonical(b[key])
    )
