"""Who runs PostgreSQL's keyword indexer (issue 32): a process that writes (`open_service()`, and
`open_storage(index_text=True)` as the relay and ingest workers open it) does; a reader
(`create=False`, every reading command's open) never does, nor a writer with `text_index="off"`,
whose searches still find every row by scanning past the index's mark."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from sessionledger.domain import EventFilter, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.ledger.text_index import TextIndexer
from sessionledger.infrastructure.settings import Settings

QUIET = 1.5
"""Seconds a process is watched for an indexer pass: three of its 0.5 s intervals."""


_ALREADY: set[threading.Thread] = set()
"""Indexer threads alive before the test began (another test's service left open must not count)."""


@pytest.fixture(autouse=True)
def _baseline() -> None:
    _ALREADY.clear()
    _ALREADY.update(t for t in threading.enumerate() if t.name == TextIndexer.THREAD)


def _indexers() -> int:
    """Indexer threads this test started that are still running."""
    return sum(
        thread.name == TextIndexer.THREAD and thread.is_alive() and thread not in _ALREADY
        for thread in threading.enumerate()
    )


def _indexed_rows(url: str) -> int:
    """The index's rows of the messages `_unindexed_session` writes."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            query = "SELECT count(*) FROM ledger_text WHERE text LIKE '%heron%'"
            return conn.execute(sa.text(query)).scalar_one()
    finally:
        engine.dispose()


def _unindexed_session(url: str, rows: int) -> str:
    """A session of `rows` messages that no indexer has reached (written with `text_index="off"`)."""
    with open_service(url, text_index="off") as service:
        assert _indexers() == 0
        session_id = service.create_session("alice").id
        for n in range(rows):
            service.append_message(session_id, UserMessage(f"a heron, {n}"))
        time.sleep(QUIET)
        assert _indexed_rows(url) == 0
        found = service.get_events(session_id, EventFilter.keyword_search("heron"))
        assert [e.message.text for e in found] == [f"a heron, {n}" for n in range(rows)]  # the scan
    return session_id


def test_a_reader_runs_no_indexer_and_a_writer_does(pg_url: str) -> None:
    session_id = _unindexed_session(pg_url, 5)
    with open_storage(Settings(database_url=pg_url), create=False) as reader:
        assert _indexers() == 0
        time.sleep(QUIET)
        assert len(reader.service.get_events(session_id, EventFilter.keyword_search("heron"))) == 5
    assert _indexed_rows(pg_url) == 0, "a reader wrote to the index"
    with open_service(pg_url) as writer:
        assert _indexers() == 1
        deadline = time.monotonic() + 30
        while _indexed_rows(pg_url) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _indexed_rows(pg_url) == 5
        assert len(writer.get_events(session_id, EventFilter.keyword_search("heron"))) == 5
    assert _indexers() == 0, "closing the writer stops its indexer"


def test_relay_and_ingest_workers_open_their_ledger_with_the_indexer(pg_url: str) -> None:
    """`open_storage(index_text=True)` (the relay's, an ingest worker's) runs it, unless turned off."""
    with open_storage(Settings(database_url=pg_url), index_text=True):
        assert _indexers() == 1
    with open_storage(Settings(database_url=pg_url, text_index="off"), index_text=True):
        assert _indexers() == 0
    with open_storage(Settings(database_url=pg_url)):
        assert _indexers() == 0, "index_text is asked for, not the default"


@pytest.mark.parametrize("index_text", [True, False], ids=["ingest", "tasks"])
def test_a_worker_process_runs_the_indexer_if_its_application_says_so(pg_url: str, index_text: bool) -> None:
    """`sessionledger worker --role ingest` builds its application with `index_text=True`, a task
    worker without: the runtime of each process opens its storage accordingly."""
    from sessionledger.workers.app import create_app
    from sessionledger.workers.runtime import close_runtimes, runtime_of

    close_runtimes()  # another test's runtime (its storage replaced, say) is not this one's
    settings = Settings(database_url=pg_url, broker_url="amqp://guest:guest@127.0.0.1:5672//")
    celery = create_app(settings, index_text=index_text)
    try:
        assert runtime_of(celery).service is not None
        assert _indexers() == int(index_text)
    finally:
        close_runtimes()
    assert _indexers() == 0


def test_a_reader_cannot_ask_for_the_indexer(pg_url: str) -> None:
    open_service(pg_url).close()  # the schema a reader needs
    with pytest.raises(ValueError, match="reading only"):
        open_storage(Settings(database_url=pg_url), create=False, index_text=True)
    assert _indexers() == 0


def test_an_unknown_text_index_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="text_index"):
        Settings(text_index="sometimes")
