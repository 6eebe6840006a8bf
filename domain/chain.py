"""A session's hash chain checked record by record: what `verify` reports when it does not hold."""

from __future__ import annotations

from collections.abc import Iterable

from sessionledger.domain.hashing import GENESIS_HASH, canonical, row_hash, sha256_hex
from sessionledger.domain.records import LedgerRecord


def covers_recorded_at(record: LedgerRecord, position: int | None = None) -> bool | None:
    """Whether the record's row hash, recomputed at `position` (its own by default), covers its
    `recorded_at` (`True`: every record the ledger writes now), is the older header without it
    (`False`), or matches neither (`None`: the record is not what the ledger wrote there).

    An edited `recorded_at` fails both: the row hash was computed over the old time, and it is
    not the hash of the header without one.
    """
    at = record.position if position is None else position
    fields = (record.prev_hash, record.session_id, at, record.version, record.event_id, record.kind,
              record.occurred_at, record.content_hash)  # fmt: skip
    if record.recorded_at is not None and record.row_hash == row_hash(*fields, record.recorded_at):
        return True
    if record.row_hash == row_hash(*fields):
        return False
    return None


def chain_problems(records: Iterable[LedgerRecord]) -> list[str]:
    """What is wrong with a session's hash chain (empty when it verifies), naming each record."""
    problems: list[str] = []
    expected_prev = GENESIS_HASH
    expected_position = 1
    for record in records:
        where = f"{record.session_id} position {record.position}"
        if record.position != expected_position:
            problems.append(f"{where}: expected position {expected_position} (a record is missing)")
        if record.prev_hash != expected_prev:
            problems.append(f"{where}: prev_hash does not match the previous record's hash")
        if record.payload is not None and sha256_hex(canonical(record.payload)) != record.content_hash:
            problems.append(f"{where}: payload does not match its content hash (edited)")
        if covers_recorded_at(record) is None:
            problems.append(f"{where}: row hash does not match the record (edited)")
        expected_prev = record.row_hash
        expected_position = record.position + 1
    return problems
