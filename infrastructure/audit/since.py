"""`verify --since`: with a trusted digest, check only what was appended after it, and its link.

A digest that is trusted (kept out of the administrator's reach, its signature checked) already
vouches for every record it covers. What is left to check is what was written since: for each
session written to since, that the ledger still holds its head as the digest saw it (same
position, same row hash) and that every record written since chains from that head, hash by hash,
up to the head the session row names; a session created since is checked from its first record.
The records are read by a range of the global position (the primary key), so the whole check
costs what was written since: neither the ledger's size nor its number of sessions. Both are the
audit port's reads (`domain.audit_port`), in one snapshot. On the SQL ledger the heads are the
database's work: one primary-key lookup per session written to since (the head's global position,
which the digest records; by session and position where the row there is not the head, so a
digest of an older release, or a head whose row was moved, is checked as before), in one statement
that returns only the heads that moved (`ledger.audit_reads.moved_heads`). It is sent on the
reading connection once the new records are read (they are sorted here, not by the database), so
the database answers it, in the same snapshot, while they are hashed.

A session nobody wrote to since is carried into the next digest as the trusted digest holds it,
not as the ledger holds it: so a digest resumed from the last never vouches for a rewrite of it,
and `verify --digest` (or `--since` with `all_heads`) against any later digest still finds one.
`all_heads` also looks up the head of every session the digest holds, which finds such a rewrite
now, at a lookup per session: a sweep to schedule (docs/proofs.md "Incremental verify"), too
dear at every scheduled digest once a ledger holds millions of sessions.

The Merkle root of today's records is then the digest's tree, resumed from the peaks the digest
keeps, with only the new records hashed: so the digest's tree is a prefix of today's by
construction, and the result carries the next digest (`verify --since OLD --next-digest NEW`
chains incremental checks). The stored projection (window, state, stats) is not replayed: that is
the full `verify`'s job, whose cost follows the sessions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sessionledger.domain.audit_port import AuditLedger, Trusted
from sessionledger.domain.merkle import MerkleMountainRange
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.infrastructure.audit.anchored import Anchor
from sessionledger.infrastructure.audit.chain import ChainHead, first_break
from sessionledger.infrastructure.audit.digest import Digest, InvalidDigest, SessionHead
from sessionledger.infrastructure.audit.verify import Finding, Verification


@dataclass(frozen=True, slots=True)
class SinceCheck:
    """What `verify --since` found: a verification per session written to since (or broken), how
    many sessions of the digest were not written to since (with `all_heads`: left as the digest
    saw them, their heads looked up), and the digest of the ledger as it is now."""

    results: tuple[Verification, ...]
    unchanged: int
    next_digest: Digest
    all_heads: bool = False
    """Whether the heads of the sessions nobody wrote to since were looked up too."""

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)


@dataclass(slots=True)
class _Appended:
    """What the ledger holds of the sessions since a digest: the records written after it (by
    session, by position, with the sha256 of each stored payload); for the digest's sessions
    whose head record is not as the digest saw it, the row hash at that position now (`None`: no
    record there; the others' is the digest's own); the head each session row names, for the
    sessions with new records or a moved head (no entry: no session row); and the last position
    of sessions whose digest head is gone."""

    records: dict[str, list[LedgerRecord]]
    digests: dict[str, list[str | None]]
    anchors: dict[str, str | None]
    heads: dict[str, ChainHead]
    last: dict[str, int]


def verify_since(
    ledger: AuditLedger, digest: Digest, *, now: datetime | None = None, all_heads: bool = False
) -> SinceCheck:
    """Check the records written since `digest` and their link to it (`InvalidDigest` when the
    digest keeps no Merkle peaks for a session it must resume the tree of).

    Only the sessions written to since are looked at; the others are the digest's, carried into
    the next one as it holds them. `all_heads`: also check that the ledger still holds the head
    of every session the digest holds (a lookup per session), so that a session nobody wrote to
    since, but whose records were rewritten, is found now rather than by the next full check."""
    if all_heads:
        for session_id, head in digest.sessions.items():
            if head.peaks is None or len(head.peaks) != head.position.bit_count():
                _resumed(digest, session_id, head)
    appended = _read(ledger, digest, all_heads)
    results: list[Verification] = []
    sessions: dict[str, SessionHead] = dict(digest.sessions)
    unchanged = len(digest.sessions)
    for session_id in sorted(appended.records.keys() | appended.anchors.keys()):
        anchor = digest.sessions.get(session_id)
        result, today = _check(session_id, anchor, appended, digest)
        if today is not None:
            sessions[session_id] = today
        else:
            sessions.pop(session_id, None)
        if result is not None:
            results.append(result)
            unchanged -= anchor is not None
    top = max((r.global_position or 0 for rs in appended.records.values() for r in rs), default=0)
    next_digest = Digest(now or datetime.now(UTC), max(top, digest.global_position), sessions)
    return SinceCheck(tuple(results), unchanged, next_digest, all_heads)


class BrokenLink(Exception):
    """The ledger no longer extends a digest: a digest resumed from it would vouch for whatever
    was rewritten, so none is taken. `check` holds what `verify --since` found."""

    def __init__(self, previous: Digest, check: SinceCheck) -> None:
        broken = [result.session_id for result in check.results if not result.ok]
        super().__init__(
            f"the ledger no longer extends digest {previous.name}: {len(broken)} sessions broken "
            f"({', '.join(broken[:5])}{', ...' if len(broken) > 5 else ''})"
        )
        self.check = check


def digest_since(
    ledger: AuditLedger, previous: Digest, *, now: datetime | None = None, all_heads: bool = False
) -> Digest:
    """The digest of the ledger as it stands, resumed from `previous` rather than read whole
    (`take_digest` reads and hashes every record): the next digest of `verify --since`, equal to
    `take_digest`'s on a ledger nobody rewrote, at the cost of the records written since (and with
    `all_heads` a head lookup per session of `previous`). A session nobody wrote to since keeps
    `previous`'s head, not the ledger's: a rewrite of it is never vouched for. `BrokenLink` when
    the check finds anything, `InvalidDigest` when `previous` keeps no Merkle peaks."""
    check = verify_since(ledger, previous, now=now, all_heads=all_heads)
    if not check.ok:
        raise BrokenLink(previous, check)
    return check.next_digest


def _resumed(digest: Digest, session_id: str, head: SessionHead) -> MerkleMountainRange:
    """The session's tree as the digest keeps it (`InvalidDigest` when it cannot be resumed)."""
    try:
        return head.mountains()
    except ValueError as error:
        raise InvalidDigest(
            f"digest {digest.name} cannot anchor --since: session {session_id}: {error}"
        ) from None


def _check(
    session_id: str, anchor: SessionHead | None, appended: _Appended, digest: Digest
) -> tuple[Verification | None, SessionHead | None]:
    """One session's verification (`None`: untouched and intact) and its head today."""
    records = appended.records.get(session_id, [])
    findings: list[Finding] = []
    after: ChainHead | None = None
    if anchor is not None:
        after = ChainHead(anchor.position, anchor.head)
        found = appended.anchors.get(session_id, anchor.head)
        if found is None:
            findings.append(_gone(session_id, anchor, appended.last.get(session_id), digest))
        elif found != anchor.head:
            findings.append(
                Finding(
                    Anchor.REWRITTEN,
                    anchor.position,
                    f"record {anchor.position} is not the head digest {digest.name} holds: it, or a record "
                    "before it, was rewritten and the hashes after it recomputed",
                )
            )
    head = appended.heads.get(session_id)
    if not findings:
        broken = first_break(records, appended.digests.get(session_id, []), head, after)
        if broken is not None:
            findings.append(Finding(broken.kind, broken.position, broken.detail))
    if anchor is not None and not records and not findings:
        return None, anchor
    mountains = _resumed(digest, session_id, anchor) if anchor is not None else MerkleMountainRange()
    mountains.extend(bytes.fromhex(record.row_hash) for record in records)
    last = records[-1] if records else None
    today = (
        anchor
        if last is None
        else SessionHead(
            mountains.size,
            last.row_hash,
            mountains.root().hex(),
            tuple(p.hex() for p in mountains.peaks),
            last.global_position,
        )
    )
    result = Verification(
        session_id=session_id,
        records=mountains.size,
        version=0 if last is None else last.version,
        head_hash="" if today is None else today.head,
        deleted=any(record.kind is Kind.ERASURE for record in records),
        findings=tuple(findings),
    )
    return result, today


def _gone(session_id: str, anchor: SessionHead, last: int | None, digest: Digest) -> Finding:
    if last is None:
        return Finding(
            Anchor.REMOVED,
            1,
            f"digest {digest.name} holds {anchor.position} records of the session, the ledger has none: "
            "the session was removed since",
        )
    return Finding(
        Anchor.TRUNCATED,
        last + 1,
        f"digest {digest.name} holds {anchor.position} records of the session, the ledger ends at {last}: "
        f"records {last + 1}..{anchor.position} were removed since",
    )


def _read(ledger: AuditLedger, digest: Digest, all_heads: bool) -> _Appended:
    """The records since the digest, and the digest's heads that moved (of the sessions written to
    since, or with `all_heads` of all), in one snapshot: the heads are asked for once the records
    are read, and answered (on PostgreSQL by the database, a primary-key lookup each) while the
    records are hashed here."""
    records: dict[str, list[LedgerRecord]] = {}
    digests: dict[str, list[str | None]] = {}
    with ledger.audit_snapshot() as snapshot:
        written, appended = snapshot.appended(digest.global_position)
        trusted = _trusted(digest, None if all_heads else written)
        with snapshot.heads_sent(trusted, written) as heads_now:
            for session_id, (new, hashed) in appended:
                records[session_id] = new
                digests[session_id] = hashed
            moved, touched = heads_now()
        gone = [sid for sid, m in moved.items() if m.row_hash is None]
        last = snapshot.last_positions(gone) if gone else {}
    heads = {sid: ChainHead(*m.head) for sid, m in moved.items() if m.head is not None}
    heads.update((sid, ChainHead(*head)) for sid, head in touched.items())
    return _Appended(records, digests, {sid: m.row_hash for sid, m in moved.items()}, heads, last)


def _trusted(digest: Digest, written: Sequence[str] | None) -> Trusted:
    """The digest's heads to look up: those of the sessions in `written`, or all (`None`)."""
    held = digest.sessions
    sids = list(held) if written is None else [sid for sid in written if sid in held]
    anchors = [held[sid] for sid in sids]
    return Trusted(
        sids,
        [anchor.position for anchor in anchors],
        [anchor.head for anchor in anchors],
        [anchor.global_position for anchor in anchors],
    )


def verify_session_since(ledger: AuditLedger, digest: Digest, session_id: str) -> Verification:
    """`verify --since` of one session the digest holds: that the record at the digest's head is
    still that head, and that the records after it chain from it up to the head the session row
    names. Its cost follows the session's records written since the digest, which is what the audit
    page's verify status needs; the stored window and state are the full `verify`'s job.

    `ValueError` when the digest holds no such session, `InvalidDigest` when it keeps no Merkle
    peaks to resume the session's tree from."""
    anchor = digest.sessions.get(session_id)
    if anchor is None:
        raise ValueError(f"digest {digest.name} holds no session {session_id!r}")
    _resumed(digest, session_id, anchor)
    with ledger.audit_snapshot() as snapshot:
        stored = next(snapshot.stored([session_id]), None)
        records, digests = snapshot.records(session_id, anchor.position - 1)
        last = snapshot.last_positions([session_id]) if not records else {}
    held = records[0] if records and records[0].position == anchor.position else None
    if held is not None:
        records, digests = records[1:], digests[1:]
    appended = _Appended(
        records={session_id: records},
        digests={session_id: digests},
        anchors={session_id: None if held is None else held.row_hash},
        heads={} if stored is None else {session_id: ChainHead(*stored.head)},
        last=last,
    )
    result, _ = _check(session_id, anchor, appended, digest)
    if result is not None:
        return result
    return Verification(  # untouched since the digest, and its head still there
        session_id=session_id,
        records=anchor.position,
        version=0 if held is None else held.version,
        head_hash=anchor.head,
        deleted=stored is not None and stored.deleted,
        findings=(),
    )
