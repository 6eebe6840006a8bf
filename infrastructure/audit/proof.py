"""Proofs for one reply: an event, and the window the model saw when it was produced, are in the
ledger a digest commits to; checked from the proof and the digest alone, with no database.

A proof carries the records it speaks of, each with its inclusion proof in the session's Merkle
tree at the digest's size (`domain.merkle`): the event, the last compaction or rewind before it
(which fixed the window's prefix and base), the prefix's records, and every record from the base
on up to the event, so that the window `replay --event` computes follows from the proof's records
alone and no record of it can be left out. Its size and the time to check it grow with the window
and the logarithm of the session's length. The format is docs/proofs.md "Proofs".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessionledger.domain.chain import covers_recorded_at
from sessionledger.domain.codec import format_timestamp, parse_timestamp
from sessionledger.domain.hashing import canonical, row_hash, sha256_hex
from sessionledger.domain.json_text import read_json
from sessionledger.domain.merkle import MerkleTree, verify_inclusion
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.replay import replay
from sessionledger.infrastructure.audit.digest import Digest, count, hex_hash

FORMAT = "sessionledger-proof/1"
_SHAPING = (Kind.COMPACTION, Kind.REWIND)


class InvalidProof(ValueError):
    """A proof that does not check, with the reason."""


@dataclass(frozen=True, slots=True)
class CheckedProof:
    """What a proof that checks shows: the event and the window positions the model saw."""

    session_id: str
    event: LedgerRecord
    window: tuple[LedgerRecord, ...]


def make_proof(records: Sequence[LedgerRecord], event_id: str, size: int | None = None) -> str:
    """The proof (canonical JSON text) that the event `event_id` and the window before it are in
    the session's tree of its first `size` records (all of them by default).

    `LookupError` when the session has no such event among them, or it was erased.
    """
    size = len(records) if size is None else size
    target = next((r for r in records[:size] if r.kind is Kind.EVENT and r.event_id == event_id), None)
    if target is None:
        raise LookupError(f"event {event_id!r} is not among the first {size} records of the session")
    if target.payload is None:
        raise LookupError(f"event {event_id!r} was erased with its session")
    before = records[: target.position - 1]
    projection = replay(before, upto_version=target.version - 1)
    start, shaping = _window_start(before, projection.shape.base)
    positions = set(range(start, target.position + 1)) | set(projection.shape.prefix)
    if shaping is not None:
        positions.add(shaping.position)
    tree = MerkleTree([bytes.fromhex(r.row_hash) for r in records[:size]])
    document = {
        "format": FORMAT,
        "session_id": target.session_id,
        "size": size,
        "root": tree.root(size).hex(),
        "event": target.position,
        "window": list(projection.window_positions),
        "records": [_record(records[p - 1], tree.inclusion_proof(p - 1, size)) for p in sorted(positions)],
    }
    return canonical(document) + "\n"


def _window_start(before: Sequence[LedgerRecord], base: int) -> tuple[int, LedgerRecord | None]:
    """The first position of the contiguous run the proof carries, and the record that shaped the
    window (the last compaction or rewind before the event; `None`: the run starts at 1)."""
    shaping = next((r for r in reversed(before) if r.kind in _SHAPING), None)
    if shaping is None:
        return 1, None
    return min(base + 1, shaping.position), shaping


def _record(record: LedgerRecord, inclusion: list[bytes]) -> dict[str, Any]:
    recorded = {}  # only where the row hash covers it (not in records written before it did)
    if record.recorded_at is not None and covers_recorded_at(record):
        recorded["recorded_at"] = format_timestamp(record.recorded_at)
    return {
        **recorded,
        "position": record.position,
        "version": record.version,
        "kind": str(record.kind),
        "event_id": record.event_id,
        "occurred_at": format_timestamp(record.occurred_at),
        "payload": record.payload,
        "content_hash": record.content_hash,
        "prev_hash": record.prev_hash,
        "inclusion": [h.hex() for h in inclusion],
    }


def check_proof(text: str, digest: Digest) -> CheckedProof:
    """The event and window the proof shows, if it checks against `digest` (`InvalidProof` with
    the reason if not)."""
    try:
        document = read_json(text)
        if text != canonical(document) + "\n":
            raise InvalidProof("the proof is not the canonical text of its own fields (altered?)")
        if document.get("format") != FORMAT:
            raise InvalidProof(f"the proof's format is not {FORMAT}")
        session_id, size, root = document["session_id"], document["size"], hex_hash(document["root"])
        _against(digest, session_id, size, root)
        records = [_checked_record(session_id, size, bytes.fromhex(root), r) for r in document["records"]]
        return _window(session_id, records, document["event"], document["window"])
    except InvalidProof:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
        raise InvalidProof(f"the proof is malformed: {error!r}") from None


def _against(digest: Digest, session_id: str, size: int, root: str) -> None:
    head = digest.sessions.get(session_id)
    if head is None:
        raise InvalidProof(f"digest {digest.name} holds no session {session_id!r}: the wrong digest")
    if (head.position, head.root) != (size, root):
        raise InvalidProof(
            f"the proof was made against {size} records of session {session_id!r}, digest {digest.name} "
            f"holds {head.position} with another root: make the proof against this digest (prove --digest)"
        )


def _checked_record(session_id: str, size: int, root: bytes, item: Mapping[str, Any]) -> LedgerRecord:
    position, version, event_id = count(item["position"]), count(item["version"]), item["event_id"]
    if event_id is not None and not isinstance(event_id, str):
        raise ValueError(f"record {position}: event_id {event_id!r} is not a string")
    payload = item["payload"]
    content_hash = hex_hash(item["content_hash"])
    prev_hash = hex_hash(item["prev_hash"])
    if payload is not None and sha256_hex(canonical(payload)) != content_hash:
        raise InvalidProof(f"record {position}: its payload does not match its content hash (tampered)")
    kind = Kind(item["kind"])
    occurred_at = _timestamp(position, item["occurred_at"])
    recorded_at = None if "recorded_at" not in item else _timestamp(position, item["recorded_at"])
    hashed = row_hash(
        prev_hash, session_id, position, version, event_id, kind, occurred_at, content_hash, recorded_at
    )
    inclusion = [bytes.fromhex(hex_hash(h)) for h in item["inclusion"]]
    if not verify_inclusion(bytes.fromhex(hashed), position - 1, size, inclusion, root):
        raise InvalidProof(
            f"record {position} is not in the ledger the digest commits to: it was tampered with, "
            "or its inclusion proof is not this tree's"
        )
    return LedgerRecord(
        session_id, position, version, kind, event_id, occurred_at, payload,
        content_hash, prev_hash, hashed, recorded_at=recorded_at,
    )  # fmt: skip


def _timestamp(position: int, text: Any) -> datetime:
    moment = parse_timestamp(text)
    if format_timestamp(moment) != text:
        raise ValueError(f"record {position}: {text!r} is not a ledger timestamp")
    return moment


def _window(session_id: str, records: list[LedgerRecord], event: int, claimed: list[int]) -> CheckedProof:
    """Recompute the window from the proof's records; they must hold all of it."""
    by_position = {r.position: r for r in records}
    if [r.position for r in records] != sorted(by_position):
        raise InvalidProof("the proof's records are not in position order, once each")
    target = by_position.get(event)
    if target is None or target.kind is not Kind.EVENT or target.payload is None:
        raise InvalidProof(f"the proof holds no readable event at position {event}")
    start = event
    while start - 1 in by_position:
        start -= 1
    before = [r for r in records if r.position < event]
    shaping = next((r for r in reversed(before) if r.position >= start and r.kind in _SHAPING), None)
    projection = replay(before, upto_version=target.version - 1)
    needed = 1 if shaping is None else min(projection.shape.base + 1, shaping.position)
    missing = [p for p in projection.shape.prefix if p not in by_position]
    if start > needed or missing:
        raise InvalidProof(
            "the proof leaves out records of the window: "
            + (f"positions {needed}..{start - 1}" if start > needed else f"prefix positions {missing}")
        )
    if list(projection.window_positions) != claimed:
        raise InvalidProof(
            f"the window the proof names ({claimed}) is not the one its records give "
            f"({list(projection.window_positions)})"
        )
    window = tuple(by_position[p] for p in projection.window_positions)
    return CheckedProof(session_id, target, window)
