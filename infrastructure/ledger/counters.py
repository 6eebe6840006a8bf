"""Worker counters (`domain.ports.CounterStore`): table `worker_counters`, or a map in memory."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from threading import Lock

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.engine import WRITE, upsert
from sessionledger.infrastructure.ledger.schema import worker_counters


def add_counts(conn: sa.Connection, deltas: Mapping[str, int]) -> None:
    """Add each non-zero delta to its total inside `conn`'s transaction: an upsert (no
    read-modify-write race), in name order (two transactions never wait on each other's rows)."""
    rows = [{"name": name, "value": delta} for name, delta in sorted(deltas.items()) if delta]
    if not rows:
        return
    add = upsert(
        conn.dialect, worker_counters, ["name"], lambda new: {"value": worker_counters.c.value + new.value}
    )
    conn.execute(add, rows)


class SqlCounterStore:
    """Totals in `worker_counters`; the ledger adds to them too, in its own writes (`add_counts`)."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})

    def add(self, deltas: Mapping[str, int]) -> None:
        if not any(deltas.values()):
            return
        with self._writer.begin() as conn:
            add_counts(conn, deltas)

    def totals(self) -> dict[str, int]:
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(worker_counters.c.name, worker_counters.c.value)).all()
        return {name: int(value) for name, value in rows}


class MemoryCounterStore:
    """Totals of the processes sharing one in-memory ledger (one process, then); that ledger adds
    to them too, under its own lock."""

    def __init__(self) -> None:
        self._lock = Lock()
        self._totals: Counter[str] = Counter()

    def add(self, deltas: Mapping[str, int]) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._totals[name] += delta

    def totals(self) -> dict[str, int]:
        with self._lock:
            return dict(self._totals)
