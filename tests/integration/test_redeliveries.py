"""The `RedeliveryCounts` contract (batches delivered again), run on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sessionledger.infrastructure.bootstrap import Storage


def test_counts_each_redelivery_of_a_message_until_it_is_forgotten(
    storage: Storage, unique: Callable[[str], str]
) -> None:
    counts, first, second = storage.redeliveries, unique("batch"), unique("batch")
    assert [counts.count(first), counts.count(first), counts.count(second)] == [1, 2, 1]
    counts.forget(first)
    counts.forget(unique("never-counted"))  # nothing to forget is fine
    assert [counts.count(first), counts.count(second)] == [1, 2]


def test_workers_counting_one_message_at_once_each_get_their_own_count(
    storage: Storage, unique: Callable[[str], str]
) -> None:
    counts, message, workers = storage.redeliveries, unique("batch"), 8
    start = threading.Barrier(workers)
    seen: list[int] = []

    def count() -> None:
        start.wait()
        seen.append(counts.count(message))

    threads = [threading.Thread(target=count) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == list(range(1, workers + 1))


def test_counts_survive_a_restart(
    storage: Storage, reopen: Callable[[], Storage], unique: Callable[[str], str]
) -> None:
    message = unique("batch")
    storage.redeliveries.count(message)
    assert reopen().redeliveries.count(message) == 2
