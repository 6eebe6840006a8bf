"""What PostgreSQL's keyword index costs the writes (issue 32): the append's ratio to one raw
autocommitted INSERT and `SessionService.ingest`'s ratio to raw COPY, with the indexer off, paced
(the default: `index_pacing.Pacing` rests while the ledger grows) and unpaced (at full speed
beside the writers, as before the pacing), rounds alternating and their order rotating.

Each round is a fresh database: raw COPYs into a copy of the ledger table first (the ledger still
empty, so no indexer has work and the baseline is the same in every mode), then the ingest of
`INGEST_EVENTS` events in batches of `payloads.LOAD_BATCH`, then appends interleaved with raw
autocommitted INSERTs while the indexer works through what the ingest left. Targets (the issue's):
with the index, the append's ratio at most 0.05 lower and the ingest's at most 10% lower.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.ledger.index_pacing import Pacing
from sessionledger.infrastructure.ledger.text_index import TextIndexer

from bench import payloads, raw, report
from bench.bench_ledger import copy_rate
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved

MODES = ("off", "paced", "unpaced")
ROUNDS = 11
"""Rounds per mode (each a fresh database)."""
INGEST_EVENTS = 20_000
APPEND_ROUNDS, APPENDS_PER_ROUND = 6, 100
APPEND_DROP, INGEST_DROP = 0.05, 0.10


def run() -> list[Row]:
    ratios: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for n in range(ROUNDS):
        for mode in MODES[n % len(MODES) :] + MODES[: n % len(MODES)]:
            ratios[mode].append(_round(mode))
    load = ", ".join(f"{figure:.1f}" for figure in os.getloadavg())
    append = {mode: statistics.median(a for a, _ in found) for mode, found in ratios.items()}
    ingest = {mode: statistics.median(i for _, i in found) for mode, found in ratios.items()}
    rows = [
        Row(
            f"{name} vs {baseline}, index {mode} (median of {ROUNDS} rounds: "
            f"{', '.join(f'{pair[column]:.2f}' for pair in ratios[mode])}; load {load})",
            f"{figure[mode]:.2f}",
            "-",
            None,
            "report",
        )
        for column, (name, baseline, figure) in enumerate(
            (("append", "autocommitted INSERT", append), ("ingest", "COPY", ingest))
        )
        for mode in MODES
    ]
    for mode in ("paced", "unpaced"):
        drop = append["off"] - append[mode]
        rows.append(
            Row(
                f"append's ratio with the index {mode}, against off: the drop",
                f"{append[mode]:.2f}",
                f"off {append['off']:.2f}",
                drop,
                f"<= {APPEND_DROP} lower" if mode == "paced" else "report",
                drop <= APPEND_DROP if mode == "paced" else None,
            )
        )
        kept = ingest[mode] / ingest["off"]
        rows.append(
            Row(
                f"ingest's ratio with the index {mode}, against off",
                f"{ingest[mode]:.3f}",
                f"off {ingest['off']:.3f}",
                kept,
                f">= {1 - INGEST_DROP:.2f} of off" if mode == "paced" else "report",
                kept >= 1 - INGEST_DROP if mode == "paced" else None,
            )
        )
    return rows


@contextmanager
def _service(url: str, mode: str) -> Iterator[SessionService]:
    """The service as a writing process opens it, its indexer `off`, `paced` (the default) or
    `unpaced` (one started beside a service opened without, never resting)."""
    with open_service(url, text_index="background" if mode == "paced" else "off") as service:
        if mode != "unpaced":
            yield service
            return
        indexer = TextIndexer(service.ledger.engine, pacing=Pacing(lambda _: None, rest=0))  # type: ignore[attr-defined]
        indexer.start()
        try:
            yield service
        finally:
            indexer.close()


def _round(mode: str) -> tuple[float, float]:
    """One fresh database's (append vs autocommitted INSERT, ingest vs COPY) with the index `mode`."""
    with (
        fresh_postgres() as url,
        _service(url, mode) as service,
        psycopg.connect(url) as conn,
        psycopg.connect(url, autocommit=True) as autocommit,
    ):
        raw.create_table(conn)
        copy = copy_rate(conn)
        loading: list[float] = []
        payloads.session_with(service, INGEST_EVENTS, loading)
        ingest = INGEST_EVENTS / sum(loading)
        session_id = service.create_session("bench", app_name="bench").id
        messages = payloads.messages(APPEND_ROUNDS * APPENDS_PER_ROUND)
        appended = iter(
            [messages[n : n + APPENDS_PER_ROUND] for n in range(0, len(messages), APPENDS_PER_ROUND)]
        )
        rows = [raw.row_of(m, n) for n, m in enumerate(messages, 1)]
        inserted = iter([rows[n : n + APPENDS_PER_ROUND] for n in range(0, len(rows), APPENDS_PER_ROUND)])
        medians = interleaved(
            APPEND_ROUNDS,
            {
                "ledger": lambda: [service.append_message(session_id, m) for m in next(appended)],
                "autocommit": lambda: [raw.insert(autocommit, row) for row in next(inserted)],
            },
        )
        return medians["autocommit"] / medians["ledger"], ingest / copy


if __name__ == "__main__":
    report.main(run)
