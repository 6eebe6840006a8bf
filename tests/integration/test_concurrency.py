"""Real concurrent writers on one session: threads and processes on PostgreSQL, threads on SQLite.

Checks what the ledger promises under contention: every append stored once, positions dense and
unique, the hash chain intact, exactly one compaction per window epoch, and no appended event
lost or dropped from the window by a compaction running at the same time.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable

import pytest
from sessionledger.domain import EventFilter, UserMessage
from sessionledger.domain.chain import chain_problems
from sessionledger.domain.compaction import CompactionRequest
from sessionledger.domain.window_stats import window_stats
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import verify

from tests.conftest import SQL_BACKENDS, sql_url
from tests.fakes.compaction import SummarizeAllButTwo

pytestmark = pytest.mark.slow


def run_together(workers: list[Callable[[], None]]) -> None:
    """Start every worker at the same instant; re-raise the first failure."""
    barrier = threading.Barrier(len(workers))
    errors: list[BaseException] = []

    def run(work: Callable[[], None]) -> None:
        barrier.wait()
        try:
            work()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


def assert_dense_ledger(service: SessionService, session_id: str, appended: int) -> None:
    records = service.records(session_id)
    assert [r.position for r in records] == list(range(1, len(records) + 1))
    assert chain_problems(records) == []
    events = [r for r in records if r.kind == "event"]
    assert len(events) == appended
    assert len({r.event_id for r in events}) == appended
    assert service.event_version(session_id) == appended


def append_many(url: str, session_id: str, writer: int, count: int) -> None:
    """One writer: its own service (its own connections and head cache)."""
    with open_service(url) as service:
        for i in range(count):
            service.append_message(session_id, UserMessage(f"w{writer}-{i}"))


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_threads_append_to_one_session(backend: str, request: pytest.FixtureRequest) -> None:
    url = sql_url(request, backend)
    with open_service(url) as shared:
        session = shared.create_session("u")
        per_writer = 40
        # two threads share one service (one head cache), two have their own
        workers = [
            lambda w=w: [
                shared.append_message(session.id, UserMessage(f"s{w}-{i}")) for i in range(per_writer)
            ]
            for w in range(2)
        ]
        workers += [lambda w=w: append_many(url, session.id, w, per_writer) for w in range(2)]
        run_together(workers)
        assert_dense_ledger(shared, session.id, 4 * per_writer)
        texts = [e.message.text for e in shared.get_events(session.id)]
        for w in range(2):  # each writer's own order is kept
            mine = [t for t in texts if t.startswith(f"w{w}-")]
            assert mine == [f"w{w}-{i}" for i in range(per_writer)]


@pytest.mark.postgres
def test_processes_append_to_one_session(pg_url: str) -> None:
    with open_service(pg_url) as service:
        session = service.create_session("u")
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=append_many, args=(pg_url, session.id, w, 30)) for w in range(3)]
        for p in processes:
            p.start()
        with open_service(pg_url) as local:  # and this process at the same time
            for i in range(30):
                local.append_message(session.id, UserMessage(f"local-{i}"))
        for p in processes:
            p.join(timeout=120)
            assert p.exitcode == 0
        assert_dense_ledger(service, session.id, 4 * 30)


class AtLeast:
    def __init__(self, events: int) -> None:
        self.events = events

    def should_compact(self, request) -> bool:
        return len(request.events) >= self.events


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_compactions_race_with_appends(backend: str, request: pytest.FixtureRequest) -> None:
    url = sql_url(request, backend)
    appends = 60
    with open_service(url, compaction_attempts=100) as service:
        session = service.create_session("u")
        for i in range(4):
            service.append_message(session.id, UserMessage(f"seed-{i}"))
        done = threading.Event()

        def appender() -> None:
            with open_service(url) as own:
                for i in range(appends):
                    own.append_message(session.id, UserMessage(f"live-{i}"))
            done.set()

        def compactor() -> None:
            with open_service(url, compaction_attempts=100) as own:
                while not done.is_set():
                    own.compact(session.id, AtLeast(4), SummarizeAllButTwo())

        run_together([appender, compactor, compactor, lambda: [service.compact(session.id, AtLeast(4),
                      SummarizeAllButTwo()) for _ in range(5)]])  # fmt: skip

        records = service.records(session.id)
        assert chain_problems(records) == []
        assert [r.position for r in records] == list(range(1, len(records) + 1))
        compactions = [r for r in records if r.kind == "compaction"]
        assert compactions, "no compaction applied"
        assert [r.payload["epoch"] for r in compactions] == list(range(len(compactions)))
        real = [e for e in service.get_events(session.id) if not e.is_synthetic]
        texts = [e.message.text for e in real]
        assert sorted(texts) == sorted(
            [f"seed-{i}" for i in range(4)] + [f"live-{i}" for i in range(appends)]
        )
        live = [t for t in texts if t.startswith("live-")]
        assert live == [f"live-{i}" for i in range(appends)]  # log order kept across compactions
        window = service.get_events(session.id, EventFilter.active())
        assert window[-1].message.text == f"live-{appends - 1}"  # the last append is in the window
        assert [e.id for e in service.replay(session.id).window] == [e.id for e in window]
        stats, expected = service.window_stats(session.id), window_stats((e, None) for e in window)
        assert (stats.events, stats.turns, stats.bytes, stats.events_since_summary) == (
            expected.events, expected.turns, expected.bytes, expected.events_since_summary,
        )  # fmt: skip
        summaries = sum(1 for r in records if r.kind == "event" and r.synthetic)
        assert service.event_version(session.id) == 4 + appends + len(compactions)
        assert summaries == len(compactions)


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_concurrent_opens_create_the_schema_once(backend: str, request: pytest.FixtureRequest) -> None:
    """Fresh database, several services opened at once: the migration runs once, all of them work."""
    url = sql_url(request, backend)
    created: list[str] = []

    def open_and_use() -> None:
        with open_service(url) as service:
            created.append(service.create_session("u").id)

    run_together([open_and_use] * 4)
    with open_service(url) as service:
        assert all(service.get_session(sid) is not None for sid in created) and len(created) == 4


def test_token_counts_filled_between_a_compactions_read_and_write(database_url: str) -> None:
    """The evaluator stores token counts while a compaction (read, LLM call, write) is in flight:
    the stats the compaction writes count the kept events as the ledger now has them."""
    with open_service(database_url) as service:
        session = service.create_session("u")
        for i in range(6):
            service.append_message(session.id, UserMessage(f"question {i}"))
        read = service.ledger.window(session.id)
        assert read is not None and set(read.token_counts) == {None}
        assert service.fill_token_counts(session.id) == 6  # between the read and the write
        result = SummarizeAllButTwo().compact(CompactionRequest(session, read.events))
        assert service.ledger.apply_compaction(read, result, "test") is not None
        assert verify(service, session.id).ok, verify(service, session.id).findings
        kept = {r.position: r.token_count for r in service.records(session.id)}
        stats = service.window_stats(session.id)
        assert stats.uncounted == 1  # the new summary only
        assert stats.tokens == sum(kept[p] for p in read.positions[-2:])
