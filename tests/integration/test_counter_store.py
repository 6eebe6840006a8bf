"""The `CounterStore` contract (worker counters), and the ledger writes that count themselves into
it, one suite run against memory, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.append_outcomes import Tally
from sessionledger.domain.compaction import SlidingWindowStrategy
from sessionledger.infrastructure.bootstrap import Storage

from tests.fakes.compaction import Always, SummarizeAllButTwo


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


def test_an_ingest_counts_its_outcomes_in_its_own_write(
    storage: Storage, unique: Callable[[str], str]
) -> None:
    service, stored, duplicate = storage.service, unique("stored"), unique("duplicate")
    tally = Tally(stored=stored, duplicate=duplicate)
    session = service.create_session("u").id
    first = [SessionEvent(session_id=session, message=UserMessage(f"m{i}")) for i in range(3)]
    lost = SessionEvent(session_id="no-such-session", message=UserMessage("lost"))
    service.ingest([*first, lost], tally=tally)
    assert storage.counters.totals()[stored] == 3 and duplicate not in storage.counters.totals()
    service.ingest([first[0], SessionEvent(session_id=session, message=UserMessage("m3"))], tally=tally)
    service.ingest([SessionEvent(session_id=session, message=UserMessage("m4"))], tally=tally)  # one event
    service.ingest([SessionEvent(session_id=session, message=UserMessage("uncounted"))])
    totals = storage.counters.totals()
    assert (totals[stored], totals[duplicate]) == (5, 1)
    assert len(service.get_events(session)) == 6


def test_a_written_compaction_counts_itself_in_its_own_write(
    storage: Storage, unique: Callable[[str], str]
) -> None:
    service, compacted = storage.service, unique("compacted")
    session = service.create_session("u").id
    for i in range(5):
        service.append_message(session, UserMessage(f"m{i}"))
    service.compact(session, Always(), SummarizeAllButTwo(), tally=Tally(compaction=compacted))
    assert storage.counters.totals()[compacted] == 1
    service.compact(
        session, Always(), SlidingWindowStrategy(max_events=100), tally=Tally(compaction=compacted)
    )
    assert storage.counters.totals()[compacted] == 1  # nothing archived: nothing written, nothing counted
