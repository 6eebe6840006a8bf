"""Where and how a session's hash chain is broken: the first broken position and the kind of break.

`domain.chain.chain_problems` says *that* a chain does not verify; an auditor also needs *how*:
a record was edited (its content or header changed), deleted (a record is missing), reordered
(records moved), or inserted (a record the ledger never wrote). The rules are the ledger's own
(`domain.hashing.row_hash`, the content hash); this module only classifies their failures, using
what every record carries: the hash of its predecessor and its own position inside its row hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sessionledger.domain.chain import covers_recorded_at
from sessionledger.domain.hashing import GENESIS_HASH
from sessionledger.domain.records import ERASABLE, Kind, LedgerRecord, derived_columns

_MAX_SHIFT = 10_000
"""How far from where it is a moved record's original position is looked for (only on a break)."""


class BreakKind(StrEnum):
    EDITED = "edited"
    DELETED = "deleted"
    REORDERED = "reordered"
    INSERTED = "inserted"


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first broken position of a chain, what kind of break it is, and why, in words."""

    position: int
    kind: BreakKind
    detail: str


@dataclass(frozen=True, slots=True)
class ChainHead:
    """The head a session row (or an export header) names: the last record's position and hash."""

    position: int
    hash: str


def first_break(
    records: Sequence[LedgerRecord],
    digests: Sequence[str | None],
    head: ChainHead | None = None,
    after: ChainHead | None = None,
    erased: bool | None = None,
) -> ChainBreak | None:
    """The first break in a session's records (by position), or `None` when the chain verifies.

    `digests[i]` is the sha256 of record i's payload as stored (`None` when erased). `head`, when
    known, catches what the records alone cannot: records missing or added at the end. Erased
    payloads are fine once the session has an erasure record. `after` is the trusted record the
    records follow (`verify --since`: a digest's head), by default none: they start at 1.
    `erased` says whether the session was deleted when the records are only a range of it (by
    default: whether they hold the erasure record).
    """
    erased_ok = any(record.kind is Kind.ERASURE for record in records) if erased is None else erased
    prev = GENESIS_HASH if after is None else after.hash
    first = 1 if after is None else after.position + 1
    for i, record in enumerate(records):
        if record.position != first + i:
            return _gap(record, first + i, head)
        problem = own_problem(record, digests[i], erased_ok)
        if problem is None and record.prev_hash == prev:
            prev = record.row_hash
            continue
        return _classify(records, i, prev, problem, head)
    return _tail_break(records, head, after)


def own_problem(record: LedgerRecord, digest: str | None, erased_ok: bool) -> str | None:
    """What is wrong with one record on its own (content, derived columns, header), if anything."""
    if record.payload is None:
        if not erased_ok:
            return "its payload is gone but the session was never deleted"
        if record.kind not in ERASABLE:
            return f"the payload of a {record.kind} record is gone (deletion keeps it)"
    elif digest != record.content_hash:
        return "its payload does not match its content hash"
    else:
        columns = _columns_problem(record)
        if columns is not None:
            return columns
    if not _verifies_at(record, record.position):
        return (
            "its header (version, event id, kind, occurred_at, recorded_at or position) "
            "does not match its row hash"
        )
    return None


def _columns_problem(record: LedgerRecord) -> str | None:
    """The columns derived from an event's payload (searched and filtered on) must agree with it."""
    try:
        expected = derived_columns(record.kind, record.payload or {})
    except (KeyError, TypeError, AttributeError):
        return "its payload is malformed"
    actual = (record.event_type, record.branch, record.synthetic)
    if actual == expected:
        return None
    for name, want, got in zip(("event_type", "branch", "synthetic"), expected, actual, strict=True):
        if want != got:
            return f"its {name} column ({got!r}) does not match its payload ({want!r})"
    return None


def _verifies_at(record: LedgerRecord, position: int) -> bool:
    """Whether the record's row hash is the one the ledger computes for it at `position` (with
    its recording time, or the older header without it)."""
    return covers_recorded_at(record, position) is not None


def _gap(record: LedgerRecord, expected: int, head: ChainHead | None) -> ChainBreak:
    if head is not None and record.position > head.position:
        return ChainBreak(
            record.position,
            BreakKind.INSERTED,
            f"record {record.position} is past the session head (position {head.position})",
        )
    missing = f"{expected}" if record.position == expected + 1 else f"{expected}..{record.position - 1}"
    return ChainBreak(expected, BreakKind.DELETED, f"no record at position {missing}")


def _classify(
    records: Sequence[LedgerRecord], i: int, prev: str, problem: str | None, head: ChainHead | None
) -> ChainBreak:
    """Record i fails: tell an edit from a deletion, a move or an insertion by how it links.

    A record names its predecessor's hash, and its row hash covers the position it was written
    at, so an intact record that was moved or renumbered still says where it belongs.
    """
    record = records[i]
    p = record.position
    if head is not None and p > head.position:
        return ChainBreak(
            p, BreakKind.INSERTED, f"record {p} is past the session head (position {head.position})"
        )
    linked = _index_of(records, record.prev_hash)
    origin = _written_at(record, len(records) + 1)
    if origin is not None and origin > p and linked is not None and linked > i:
        return ChainBreak(p, BreakKind.REORDERED, f"record {p} was written as position {origin}")
    if origin is not None and origin < p and linked is not None and linked < i - 1:
        first = records[linked + 1].position
        return ChainBreak(
            first,
            BreakKind.INSERTED,
            f"records {first}..{p - 1} are not part of the chain: {p} follows {origin - 1}",
        )
    following = records[i + 1] if i + 1 < len(records) else None
    if following is not None and following.prev_hash == prev and not _is_named(records, record.row_hash):
        return ChainBreak(
            p,
            BreakKind.INSERTED,
            f"record {p} is not part of the chain: {following.position} follows {p - 1}",
        )
    if record.prev_hash == prev:
        return ChainBreak(p, BreakKind.EDITED, f"record {p}: {problem}")
    if origin is not None and origin > p and linked is None:
        return ChainBreak(
            p,
            BreakKind.DELETED,
            f"record {p} was written as {origin}: {origin - p} record(s) before it are missing",
        )
    if origin is not None and origin < p:
        return ChainBreak(p, BreakKind.REORDERED, f"record {p} was written as position {origin}")
    if problem is None:  # intact where it is, but its predecessor is not the record it names
        rewritten = max(p - 1, 1)
        return ChainBreak(
            rewritten,
            BreakKind.EDITED,
            f"record {rewritten} was rewritten: record {p} names a different hash for its predecessor",
        )
    return ChainBreak(p, BreakKind.EDITED, f"record {p}: {problem}")


def _written_at(record: LedgerRecord, last: int) -> int | None:
    """The position the record's row hash was computed for, searched outwards from where it is."""
    p = record.position
    for distance in range(min(max(last, p), _MAX_SHIFT) + 1):
        for candidate in {p + distance, p - distance}:
            if candidate >= 1 and _verifies_at(record, candidate):
                return candidate
    return None


def _is_named(records: Sequence[LedgerRecord], hash_: str) -> bool:
    """Whether some record names `hash_` as its predecessor's."""
    return any(record.prev_hash == hash_ for record in records)


def _index_of(records: Sequence[LedgerRecord], hash_: str) -> int | None:
    """Index of the record whose row hash is `hash_` (-1 for the genesis hash), else None."""
    if hash_ == GENESIS_HASH:
        return -1
    return next((j for j, record in enumerate(records) if record.row_hash == hash_), None)


def _tail_break(
    records: Sequence[LedgerRecord], head: ChainHead | None, after: ChainHead | None
) -> ChainBreak | None:
    if head is None:
        return None
    if records:
        last = ChainHead(records[-1].position, records[-1].row_hash)
    elif after is not None:
        last = after
    else:
        return ChainBreak(1, BreakKind.DELETED, "the session has no records")
    if head.position > last.position:
        return ChainBreak(
            last.position + 1,
            BreakKind.DELETED,
            f"the session head is position {head.position} but the ledger ends at {last.position}",
        )
    if head.position < last.position:
        return ChainBreak(
            head.position + 1,
            BreakKind.INSERTED,
            f"records {head.position + 1}..{last.position} are past the session head",
        )
    if head.hash != last.hash:
        return ChainBreak(
            last.position,
            BreakKind.EDITED,
            f"record {last.position} was rewritten: the session head names another hash",
        )
    return None
