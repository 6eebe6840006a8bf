"""`verify` against digests kept outside the database: the ledger today must extend every digest.

The hash chain alone cannot catch whoever rewrites a record and recomputes every hash after it
(and the session head): the chain is consistent again. A digest taken before holds the Merkle
root of each session's row hashes as they were, so the rewritten prefix no longer hashes to it.
With several digests of a session the rewritten range is narrowed to between the last digest
that still matches and the first that does not. Erasure for privacy keeps every content hash,
so the row hashes, and so the digests, stay valid.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from enum import StrEnum

from sessionledger.domain.merkle import MerkleTree
from sessionledger.domain.records import LedgerRecord
from sessionledger.infrastructure.audit.digest import Digest
from sessionledger.infrastructure.audit.proof import make_proof
from sessionledger.infrastructure.audit.reader import read_snapshot
from sessionledger.infrastructure.audit.shared_state import SharedStateFold
from sessionledger.infrastructure.audit.verify import Finding, Verification, check_snapshot, with_shared_state
from sessionledger.infrastructure.service import SessionService


class Anchor(StrEnum):
    """How the ledger fails to extend a digest."""

    REWRITTEN = "rewritten"
    TRUNCATED = "truncated"
    REMOVED = "removed"


def verify_against(service: SessionService, digests: Sequence[Digest]) -> Iterator[Verification]:
    """`verify` of every session in the ledger or in a digest, with what the digests add."""
    session_ids = list(service.ledger.session_ids())
    known = set(session_ids)
    session_ids += sorted({sid for digest in digests for sid in digest.sessions} - known)
    fold = SharedStateFold()
    results = []
    for session_id in session_ids:
        snapshot = read_snapshot(service.ledger, session_id)
        fold.add(snapshot.records)
        hashes = [record.row_hash for record in snapshot.records]
        anchored = anchor_findings(session_id, hashes, digests)
        if not hashes:
            results.append(Verification(session_id, 0, 0, "", False, tuple(anchored)))
            continue
        checked = check_snapshot(session_id, snapshot)
        results.append(replace(checked, findings=(*checked.findings, *anchored)))
    yield from with_shared_state(results, fold, service.ledger)


def anchor_findings(session_id: str, hashes: Sequence[str], digests: Sequence[Digest]) -> list[Finding]:
    """Whether the session's row hashes (by position) extend what each digest recorded of it."""
    tree: MerkleTree | None = None
    matched: list[int] = []
    failed: list[tuple[int, Digest]] = []
    findings: list[Finding] = []
    for digest in sorted(digests, key=lambda d: d.taken_at):
        head = digest.sessions.get(session_id)
        if head is None:
            continue
        if not hashes:
            findings.append(
                Finding(
                    Anchor.REMOVED,
                    1,
                    f"digest {digest.name} holds {head.position} records of the session, "
                    "the ledger has none: the session was removed since",
                )
            )
            break
        if len(hashes) < head.position:
            findings.append(
                Finding(
                    Anchor.TRUNCATED,
                    len(hashes) + 1,
                    f"digest {digest.name} holds {head.position} records of the session, the ledger "
                    f"ends at {len(hashes)}: records {len(hashes) + 1}..{head.position} were removed since",
                )
            )
            continue
        tree = tree or MerkleTree([bytes.fromhex(h) for h in hashes])
        if hashes[head.position - 1] == head.head and tree.root(head.position).hex() == head.root:
            matched.append(head.position)
        else:
            failed.append((head.position, digest))
    if failed:
        position, digest = min(failed, key=lambda pair: pair[0])
        last_good = max((p for p in matched if p < position), default=0)
        findings.insert(
            0,
            Finding(
                Anchor.REWRITTEN,
                last_good + 1,
                f"records {last_good + 1}..{position} no longer hash to the Merkle root digest "
                f"{digest.name} holds for them: a record in that range was rewritten and the hashes "
                f"after it recomputed",
            ),
        )
    return findings


class NotExtended(ValueError):
    """The ledger does not extend the digest a proof was asked against (a failed check)."""


def proof_against(records: Sequence[LedgerRecord], event_id: str, anchor: Digest | None = None) -> str:
    """The proof of the event and the window before it (`make_proof`): against `anchor`, at the
    size it holds of the session, once the session's records are checked to extend it (else
    `NotExtended`; `ValueError` when it holds no such session), or as the session stands.
    `LookupError` as `make_proof` says it."""
    if anchor is None:
        return make_proof(records, event_id)
    session_id = records[0].session_id
    head = anchor.sessions.get(session_id)
    if head is None:
        raise ValueError(f"digest {anchor.name} holds no session {session_id!r}")
    mismatch = anchor_findings(session_id, [r.row_hash for r in records], [anchor])
    if mismatch:
        raise NotExtended(
            f"session {session_id}: the ledger does not extend the digest: {mismatch[0].detail}"
        )
    return make_proof(records, event_id, head.position)
