"""`verify`: a session's ledger is intact, and what the service serves is what the ledger says.

Two checks (CONTRACT.md §5; docs/architecture.md "Hash chain"):
- the chain: every record's content hash, row hash, link to its predecessor and dense position,
  and the session head (`infrastructure.audit.chain` names the first break and its kind);
- the projection: the stored active window (positions, in order), the session-scoped state, the
  session's own fields and the window stats equal what `domain.ledger.replay` rebuilds from the
  records alone, at the stored version.

The stored projection is read before the records, and the replay stops at the stored version, so
appends racing a verify do not count as mismatches; a projection read that another write still
split (or a token count filled meanwhile) is simply read again once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.codec import format_timestamp
from domain.errors import SessionNotFound
from domain.events import SessionEvent
from domain.ledger import Kind, LedgerRecord, Projection, canonical, replay, window_stats
from domain.ports import Ledger, Window
from domain.sessions import APP_PREFIX, USER_PREFIX, Session
from infrastructure.audit.chain import first_break
from infrastructure.audit.reader import read_snapshot
from infrastructure.service import SessionService

_ATTEMPTS = 2
_STABLE_READS = 5


class Mismatch(StrEnum):
    """Ways the stored projection can differ from the replayed one (the chain's are `BreakKind`)."""

    VERSION = "version"
    WINDOW = "window"
    STATE = "state"
    SESSION = "session"
    STATS = "stats"
    REPLAY = "replay"


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


@dataclass(frozen=True, slots=True)
class _Stored:
    """What the service serves for a session, read at one version (`session`/`window` None: deleted)."""

    version: int
    session: Session | None
    window: Window | None


def verify(service: SessionService, session_id: str) -> Verification:
    """Check one session's chain and stored projection; `SessionNotFound` when it has no records."""
    ledger = service.ledger
    for _ in range(_ATTEMPTS):
        stored = _read_stored(ledger, session_id)
        snapshot = read_snapshot(ledger, session_id)
        records = snapshot.records
        if not records:
            raise SessionNotFound(f"session {session_id!r} not found")
        mismatches = _projection_mismatches(stored, records)
        if not mismatches:
            break
    found = first_break(records, snapshot.digests, snapshot.head)
    chain = [] if found is None else [Finding(found.kind, found.position, found.detail)]
    return Verification(
        session_id=session_id,
        records=len(records),
        version=records[-1].version,
        head_hash=records[-1].row_hash,
        deleted=any(record.kind is Kind.ERASURE for record in records),
        findings=(*chain, *mismatches),
    )


def verify_all(service: SessionService) -> Iterator[Verification]:
    """`verify` for every session the ledger has records for, deleted ones included."""
    for session_id in service.ledger.session_ids():
        yield verify(service, session_id)


def _read_stored(ledger: Ledger, session_id: str) -> _Stored:
    """The version, session and window read until a read is not split by a concurrent write."""
    for _ in range(_STABLE_READS):
        version = ledger.version(session_id)
        window = ledger.window(session_id)
        session = ledger.get_session(session_id)
        if ledger.version(session_id) == version and (window is None or window.head.version == version):
            break
    return _Stored(version, session, window)


def _projection_mismatches(stored: _Stored, records: Sequence[LedgerRecord]) -> list[Finding]:
    deleted = any(record.kind is Kind.ERASURE for record in records)
    if deleted or stored.session is None or stored.window is None:
        if deleted and stored.session is None and stored.window is None:
            return []
        problem = (
            "the ledger records a deletion but the session is still readable"
            if deleted
            else "the session is not readable but its ledger records no deletion"
        )
        return [Finding(Mismatch.SESSION, None, problem)]
    try:
        projection = replay(records, upto_version=stored.version)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        return [Finding(Mismatch.REPLAY, None, f"the records cannot be replayed: {error!r}")]
    if projection.version != stored.version:
        return [
            Finding(
                Mismatch.VERSION,
                None,
                f"the session is at version {stored.version} but its ledger reaches {projection.version}",
            )
        ]
    by_position = {record.position: record for record in records}
    findings = [
        *_window_mismatch(stored.window, projection, by_position),
        *_state_mismatch(stored.session, projection),
        *_session_mismatch(stored.session, records[0]),
    ]
    if not findings:
        findings += _stats_mismatch(stored.window, projection, by_position)
    return findings


def _window_mismatch(
    window: Window, projection: Projection, by_position: Mapping[int, LedgerRecord]
) -> list[Finding]:
    stored = list(zip(window.positions, (e.id for e in window.events), strict=True))
    replayed = [(p, by_position[p].event_id or "") for p in projection.window_positions]
    if stored == replayed:
        return []
    index = next(
        (i for i, (a, b) in enumerate(zip(stored, replayed, strict=False)) if a != b),
        min(len(stored), len(replayed)),
    )
    here = stored[index] if index < len(stored) else None
    there = replayed[index] if index < len(replayed) else None
    return [
        Finding(
            Mismatch.WINDOW,
            (here or there or (None,))[0],
            f"the stored window ({len(stored)} events) differs from the replayed one ({len(replayed)} "
            f"events) at index {index}: stored {_slot(here)}, replayed {_slot(there)}",
        )
    ]


def _slot(slot: tuple[int, str] | None) -> str:
    return "nothing" if slot is None else f"position {slot[0]} (event {slot[1]})"


def _state_mismatch(session: Session, projection: Projection) -> list[Finding]:
    stored = {k: v for k, v in session.state.items() if not k.startswith((APP_PREFIX, USER_PREFIX))}
    keys = _differing(stored, projection.session_state)
    if not keys:
        return []
    return [
        Finding(Mismatch.STATE, None, f"the stored session state differs from the replayed one on {keys}")
    ]


def _session_mismatch(session: Session, created: LedgerRecord) -> list[Finding]:
    """The session row's own fields against the `created` record they were written from."""
    if created.kind is not Kind.CREATED or created.payload is None:
        return [
            Finding(Mismatch.SESSION, created.position, "the ledger does not start with a created record")
        ]
    stored = {
        "user_id": session.user_id,
        "app_name": session.app_name,
        "metadata": dict(session.metadata),
        "created_at": format_timestamp(session.created_at),
        "expires_at": None if session.expires_at is None else format_timestamp(session.expires_at),
    }
    keys = _differing(stored, {key: created.payload.get(key) for key in stored})
    if not keys:
        return []
    return [
        Finding(
            Mismatch.SESSION, created.position, f"the session row differs from its created record on {keys}"
        )
    ]


def _stats_mismatch(
    window: Window, projection: Projection, by_position: Mapping[int, LedgerRecord]
) -> list[Finding]:
    readable = [p for p in projection.window_positions if by_position[p].payload is not None]
    pairs: list[tuple[SessionEvent, int | None]] = [
        (event, by_position[position].token_count)
        for position, event in zip(readable, projection.window, strict=True)
    ]
    expected = window_stats(pairs)
    if expected == window.stats:
        return []
    return [
        Finding(
            Mismatch.STATS,
            None,
            f"the stored window stats {window.stats} differ from the replayed {expected}",
        )
    ]


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Keys whose values differ (exactly, as JSON: `1` is not `true`), sorted."""
    return sorted(
        key
        for key in a.keys() | b.keys()
        if key not in a or key not in b or canonical(a[key]) != canonical(b[key])
    )
