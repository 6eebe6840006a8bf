"""`driver.Autocommit`: the kept autocommit connection is reused while it is free and healthy, and
handed back to the pool whenever reusing it could be wrong (after an error, when idle, in another
process); a connection the server ended (as a restart does), kept or pooled, is replaced before
it is used."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.ledger import driver as driver_module
from sessionledger.infrastructure.ledger.driver import Autocommit
from sessionledger.infrastructure.ledger.engine import create_ledger_engine

from tests.conftest import SQL_BACKENDS, sql_url
from tests.integration.server_side import end_connections


@pytest.fixture(params=SQL_BACKENDS)
def engine(request) -> Iterator[sa.Engine]:
    url = sql_url(request, request.param, shared=True)
    engine = create_ledger_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def connections(engine: sa.Engine) -> Iterator[Autocommit]:
    kept = Autocommit(engine)
    yield kept
    kept.close()


@pytest.fixture
def checkouts(engine: sa.Engine) -> list[int]:
    """The process of every pool checkout from now on."""
    seen: list[int] = []
    sa.event.listen(engine, "checkout", lambda *_: seen.append(os.getpid()))
    return seen


def _run(driver, sql: str) -> None:
    """`sql` on a driver connection, through a cursor (PyMySQL's connections execute nothing themselves)."""
    driver.cursor().execute(sql)


def _backend_pid(driver) -> object:
    """The server process of a PostgreSQL connection; the connection object itself elsewhere."""
    return driver.info.backend_pid if hasattr(driver, "info") else id(driver)


def test_one_connection_serves_calls_in_turn(connections: Autocommit, checkouts: list[int]) -> None:
    with connections() as first:
        before = _backend_pid(first)
    for _ in range(3):
        with connections() as again:
            assert _backend_pid(again) == before
    assert len(checkouts) == 1


def test_each_statement_commits_on_its_own(connections: Autocommit, engine: sa.Engine) -> None:
    with connections() as driver:
        _run(driver, "CREATE TABLE autocommit_probe (n INTEGER)")
        _run(driver, "INSERT INTO autocommit_probe VALUES (1)")
    try:
        with engine.connect() as other:  # another connection sees the row: it was committed
            assert other.execute(sa.text("SELECT count(*) FROM autocommit_probe")).scalar() == 1
    finally:
        with connections() as driver:
            _run(driver, "DROP TABLE autocommit_probe")


def test_a_caller_that_finds_it_taken_gets_a_connection_of_its_own(connections: Autocommit) -> None:
    seen: list[object] = []
    with connections() as outer:
        seen.append(_backend_pid(outer))
        with connections() as nested:  # the same thread: no deadlock
            seen.append(_backend_pid(nested))
        worker = threading.Thread(target=lambda: seen.append(_used_by(connections)))
        worker.start()
        worker.join()
    assert seen[0] != seen[1]
    assert seen[0] != seen[2]


def _used_by(connections: Autocommit) -> object:
    with connections() as driver:
        return _backend_pid(driver)


def test_an_error_hands_the_connection_back(connections: Autocommit, checkouts: list[int]) -> None:
    with pytest.raises(Exception, match="no_such_table"), connections() as driver:
        _run(driver, "SELECT * FROM no_such_table")
    with connections() as driver:
        _run(driver, "SELECT 1")
    assert len(checkouts) == 2  # the second call went through the pool (its reset and checks) again


def test_an_idle_connection_goes_back_to_the_pool_to_be_checked(
    connections: Autocommit, checkouts: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    with connections():
        pass
    monkeypatch.setattr(driver_module, "PING_AFTER_IDLE_SECONDS", -1.0)  # every gap is "idle"
    with connections() as driver:
        _run(driver, "SELECT 1")
    assert len(checkouts) == 2, "an idle connection was used again without the pool's idle check"


def test_a_forked_process_does_not_use_its_parents_connection(
    engine: sa.Engine, connections: Autocommit, checkouts: list[int]
) -> None:
    with connections():
        pass
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 if it checked out a connection of its own
        try:
            engine.dispose(close=False)
            with connections() as driver:
                _run(driver, "SELECT 1")
            os._exit(0 if checkouts[-1] == os.getpid() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with connections() as driver:  # and the parent's still works
        _run(driver, "SELECT 1")


def test_close_returns_the_connection(engine: sa.Engine) -> None:
    connections = Autocommit(engine)
    with connections():
        pass
    assert engine.pool.checkedout() == 1
    connections.close()
    assert engine.pool.checkedout() == 0


@pytest.fixture(params=["postgres", "mariadb"])
def server_url(request) -> str:
    """A fresh database of each ledger with a server (whose connections the tests end)."""
    return sql_url(request, request.param)


def _server_id(driver) -> object:
    """Which connection the server sees: its process (PostgreSQL), its thread (MariaDB)."""
    cursor = driver.cursor()
    cursor.execute("SELECT pg_backend_pid()" if hasattr(driver, "pgconn") else "SELECT CONNECTION_ID()")
    return cursor.fetchone()[0]


def test_a_kept_connection_the_server_ended_is_replaced_before_it_is_used(server_url: str) -> None:
    engine = create_ledger_engine(server_url)
    connections = Autocommit(engine)
    try:
        with connections() as driver:
            ended = _server_id(driver)
        end_connections(server_url)
        with connections() as driver:  # within PING_AFTER_IDLE_SECONDS: no ping would have found it
            assert _server_id(driver) != ended
    finally:
        connections.close()
        engine.dispose()


def test_appends_after_the_server_ended_every_connection_all_land(server_url: str) -> None:
    """As after a restart of the database: the kept connection and each pooled one is found closed
    at its next use and replaced; no append fails, none is lost, the chain holds."""
    with open_service(server_url) as service:
        session_id = service.create_session("u").id

        def append_in_threads(tag: str) -> None:  # several at once: the pool holds several connections
            with ThreadPoolExecutor(4) as pool:
                list(
                    pool.map(lambda n: service.append_message(session_id, UserMessage(f"{tag}{n}")), range(8))
                )

        append_in_threads("before-")
        end_connections(server_url)
        append_in_threads("after-")
        texts = sorted(m.text for m in service.get_messages(session_id))
        assert texts == sorted([f"before-{n}" for n in range(8)] + [f"after-{n}" for n in range(8)])
        assert verify(service, session_id).ok
