"""No read can exhaust the database or the process: keyword search reads each payload once, a
regular expression is searched under a time limit, and every statement under a timeout."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa
from sessionledger.domain import EventFilter, MatchMode, SessionEvent, UserMessage
from sessionledger.domain.filters import MAX_KEYWORDS
from sessionledger.infrastructure import SessionService, Settings, open_service
from sessionledger.infrastructure.bootstrap import open_engine
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.driver import Autocommit, DriverStatement
from sessionledger.infrastructure.ledger.events import EventReads
from sessionledger.infrastructure.ledger.migrate import ADVISORY_LOCK_KEY
from sessionledger.infrastructure.ledger.schema import ledger
from sessionledger.infrastructure.ledger.sqlite_timeout import TimedConnection
from sessionledger.infrastructure.ledger.window import WindowReads

from tests.unit.test_search_bounds import calibrated_run

TERMS = [f"term{i:02d}" for i in range(MAX_KEYWORDS)]


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


def texts(events: list[SessionEvent]) -> list[str | None]:
    return [event.message.text for event in events]


def test_every_term_still_counts_on_every_backend(service: SessionService) -> None:
    session_id = service.create_session("u").id
    for text in ("TERM00 and term19", "only term07", "nothing here", "term00 term07 term19"):
        service.append_message(session_id, UserMessage(text))
    assert texts(service.get_events(session_id, EventFilter(keywords=TERMS))) == [
        "TERM00 and term19",
        "only term07",
        "term00 term07 term19",
    ]
    every = EventFilter(keywords=["term00", "term07", "term19"], match_mode=MatchMode.ALL)
    assert texts(service.get_events(session_id, every)) == ["term00 term07 term19"]
    with_keyword = EventFilter(keyword="and", keywords=["term19", "term07"])
    assert texts(service.get_events(session_id, with_keyword)) == ["TERM00 and term19"]
    assert texts(service.get_events(session_id, EventFilter(keyword="only"))) == ["only term07"]


@pytest.mark.timeout(120)
def test_a_catastrophic_pattern_returns_promptly_on_every_backend(service: SessionService) -> None:
    session_id = service.create_session("u").id
    service.append_message(session_id, UserMessage("a" * 26 + "b"))
    service.append_message(session_id, UserMessage("b" + "a" * 26))
    started = time.monotonic()
    assert texts(service.get_events(session_id, EventFilter.pattern_search(r"(a+)+$"))) == ["b" + "a" * 26]
    assert time.monotonic() - started < 3

    service.append_message(session_id, UserMessage("a" * 40 + "b"))
    started = time.monotonic()
    with pytest.raises(ValueError, match="backtracks catastrophically"):
        service.get_events(session_id, EventFilter.pattern_search(r"(a|aa)+$"))
    assert time.monotonic() - started < 15


@pytest.mark.timeout(120)
def test_one_read_has_one_pattern_budget_on_every_backend(service: SessionService) -> None:
    """Issue 25: forty events each searched within the bound took 30 s together."""
    session_id = service.create_session("u").id
    run = calibrated_run()
    service.ingest([SessionEvent(session_id=session_id, message=UserMessage(run)) for _ in range(40)])
    started = time.monotonic()
    with pytest.raises(ValueError, match="took longer than 1 s on the events of one read"):
        service.get_events(session_id, EventFilter.pattern_search(r"(a|aa)+$"))
    assert time.monotonic() - started < 15  # about the budget, however loaded the machine


# --- one extraction per row, whatever the number of terms ------------------------------------------


def test_sqlite_extracts_and_lowers_each_text_once(sqlite_url: str) -> None:
    """SQLite's `lower()` is the ledger's own Python function: count its calls per search."""
    with open_service(sqlite_url) as service:
        session_id = service.create_session("u").id
        service.ingest([SessionEvent(session_id=session_id, message=UserMessage(f"m{i}")) for i in range(30)])
    engine = open_engine(Settings(database_url=sqlite_url))
    calls: list[str | None] = []

    def counting_lower(text: str | None) -> str | None:
        calls.append(text)
        return None if text is None else text.lower()

    @sa.event.listens_for(engine, "connect")
    def _count_lower(dbapi_connection, _record) -> None:
        dbapi_connection.create_function("lower", 1, counting_lower)

    engine.dispose()  # the connections opened so far have the ledger's own lower()
    try:
        reads = EventReads(engine, WindowReads(engine, Autocommit(engine)))
        for mode in MatchMode:
            for search in (
                EventFilter(keywords=TERMS, match_mode=mode),
                EventFilter(keyword="m", keywords=TERMS[:5], match_mode=mode),
            ):
                calls.clear()
                reads.events(session_id, search)
                assert len(calls) == 30, (mode, search)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgresql_parses_each_payload_once(pg_url: str) -> None:
    with open_service(pg_url) as service:
        session_id = service.create_session("u").id
        service.append_message(session_id, UserMessage(" ".join(TERMS) + " " + "x" * 100_000))
    engine = open_engine(Settings(database_url=pg_url))
    try:
        with engine.connect() as conn:
            for search in (
                EventFilter(keywords=TERMS),
                EventFilter(keyword="x", keywords=TERMS, match_mode="all"),
            ):
                query = statements.LIVE_EVENTS.add_columns(ledger.c.event_id)
                query = query.where(*statements.criteria(search, conn.dialect))
                values = {"sid": session_id, **statements.filter_values(search)}
                explain = DriverStatement(query, conn.dialect)  # the statement as it runs, explained
                with conn.connection.dbapi_connection.cursor() as cursor:
                    cursor.execute(f"EXPLAIN (ANALYZE, VERBOSE) {explain.sql}", explain.params(values))
                    plan = "\n".join(line for (line,) in cursor.fetchall())
                assert plan.count("lower(") == 1, plan
                assert plan.count("#>>") == 1, plan
                assert conn.execute(query, values).scalars().all() != []
    finally:
        engine.dispose()


# --- the statement timeout ---------------------------------------------------------------------------


def test_the_statement_timeout_is_a_setting_with_a_sensible_default() -> None:
    assert Settings().statement_timeout == 30.0
    with pytest.raises(ValueError, match="greater than 0"):
        Settings(statement_timeout=0)


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_a_postgresql_statement_past_the_timeout_is_cancelled_and_the_service_stays_usable(
    pg_url: str,
) -> None:
    with open_service(pg_url) as service:
        session_id = service.create_session("u").id
        service.append_message(session_id, UserMessage("hello"))
    plain_url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with open_service(pg_url, statement_timeout=0.5) as service, psycopg.connect(plain_url) as locker:
        # the lock goes with its transaction after 10 s idle: a read without a timeout waits that long
        locker.execute("SET idle_in_transaction_session_timeout = '10s'")
        locker.execute("LOCK TABLE ledger IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError, match="canceling statement due to statement timeout"):
            service.get_events(session_id, EventFilter(keyword="hello"))
        assert time.monotonic() - started < 5
        locker.rollback()
        assert texts(service.get_events(session_id, EventFilter(keyword="hello"))) == ["hello"]


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_a_schema_upgrade_is_exempt_from_the_statement_timeout(pg_url: str) -> None:
    """Opening waits for another process's upgrade (its advisory lock) however long it takes."""
    plain_url = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
        release = threading.Timer(
            1.5, holder.execute, ("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
        )
        release.start()
        try:
            started = time.monotonic()
            with open_service(pg_url, statement_timeout=0.2) as service:
                assert time.monotonic() - started > 1
                assert service.create_session("u").user_id == "u"
        finally:
            release.join()


@pytest.mark.timeout(120)
def test_a_sqlite_statement_past_the_timeout_is_cancelled_and_the_service_stays_usable(
    sqlite_url: str,
) -> None:
    text = "the quick brown fox jumps over the lazy dog " * 40
    with open_service(sqlite_url) as service:
        session_id = service.create_session("u").id
        events = [
            SessionEvent(session_id=session_id, message=UserMessage(f"{i} {text}")) for i in range(5000)
        ]
        service.ingest(events)
        started = time.monotonic()
        assert service.get_events(session_id, EventFilter(keywords=["absent", "missing"])) == []
        untimed = time.monotonic() - started
    timeout = 0.002
    assert untimed > 5 * timeout, (
        "the search must take longer than the timeout for this test to mean anything"
    )
    with open_service(sqlite_url, statement_timeout=timeout) as service:
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError, match=r"statement timeout: .* longer than 0\.002 s"):
            service.get_events(session_id, EventFilter(keywords=["absent", "missing"]))
        assert time.monotonic() - started < untimed
        assert service.get_session(session_id).id == session_id
        assert service.event_version(session_id) == 5000


def test_an_unrelated_interruption_keeps_its_own_message() -> None:
    """Only the timeout's interruptions are reworded."""
    connection = sqlite3.connect(":memory:", factory=TimedConnection)
    try:
        connection.limit_statements(60)
        connection.set_progress_handler(lambda: 1, 1)  # interrupts everything, long before the timeout
        with pytest.raises(sqlite3.OperationalError, match=r"^interrupted$"):
            connection.execute("SELECT 1")
        with pytest.raises(sqlite3.OperationalError, match=r"^interrupted$"):
            connection.cursor().execute("SELECT 1")
    finally:
        connection.close()
