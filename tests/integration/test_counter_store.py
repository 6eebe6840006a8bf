"""The `CounterStore` contract (worker counters), one suite run against memory, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sessionledger.infrastructure.bootstrap import Storage


def test_deltas_add_up_per_counter(storage: Storage, unique: Callable[[str], str]) -> None:
    counters, ingested, compacted = storage.counters, unique("ingested"), unique("compacted")
    counters.add({ingested: 100, compacted: 1})
    counters.add({ingested: 50})
    counters.add({})  # nothing to add is fine
    totals = counters.totals()
    assert totals[ingested] == 150 and totals[compacted] == 1
    assert unique("never-counted") not in totals


def test_processes_adding_at_once_lose_nothing(storage: Storage, unique: Callable[[str], str]) -> None:
    counters, name, workers, rounds = storage.counters, unique("ingested"), 6, 20
    start = threading.Barrier(workers)

    def add() -> None:
        start.wait()
        for _ in range(rounds):
            counters.add({name: 1})

    threads = [threading.Thread(target=add) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counters.totals()[name] == workers * rounds


def test_totals_survive_a_restart(
    storage: Storage, reopen: Callable[[], Storage], unique: Callable[[str], str]
) -> None:
    name = unique("ingested")
    storage.counters.add({name: 7})
    again = reopen()
    again.counters.add({name: 1})
    assert again.counters.totals()[name] == 8 and storage.counters.totals()[name] == 8
