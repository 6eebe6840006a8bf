"""Shared fixtures: real databases for the backends the contract suite runs against."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from types import FrameType

import psutil
import psycopg
import pymysql
import pytest

PG_ADMIN_URL = os.environ.get("SESSIONLEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
MARIADB_ADMIN = os.environ.get("SESSIONLEDGER_TEST_MARIADB", "root@127.0.0.1:3306")
"""user@host:port of a MariaDB (or MySQL) account that may create and drop databases."""


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI job's timeout, `kill`) interrupts the run as Ctrl-C does, so every fixture's
    `finally` still drops its databases and stops its servers: by default SIGTERM ends the process
    at once and leaves them behind. A second SIGTERM does not cut that teardown short.

    On pytest-xdist (`make test`), the workers hold the fixtures. The controller passes a SIGTERM
    on to them, its only children, and asks them to stop: execnet interrupts a worker with SIGINT
    5 s later, and the controller kills it 10 s after asking. A worker's teardown therefore starts
    at its first SIGTERM or SIGINT, and neither signal cuts it short afterwards. Before, a teardown
    began only at the 5 s mark, or was cut short there, and left its databases behind."""
    if hasattr(config, "workerinput"):
        signal.signal(signal.SIGINT, _interrupt_worker)
        signal.signal(signal.SIGTERM, _interrupt_worker)
    elif config.getoption("numprocesses", None):
        signal.signal(signal.SIGTERM, _interrupt_workers)
    else:
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(number: int, _frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {number}")


def _interrupt_worker(number: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _interrupt(number, frame)


def _interrupt_workers(number: int, frame: FrameType | None) -> None:
    for worker in psutil.Process().children():
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.send_signal(signal.SIGTERM)
    _interrupt(number, frame)


def _pg_database() -> Iterator[str]:
    name = f"sl_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _mariadb_database() -> Iterator[str]:
    """As `_pg_database`: a database of its own, dropped afterwards (an interrupted run's too, as
    the `finally` runs on KeyboardInterrupt)."""
    name = f"sl_test_{uuid.uuid4().hex[:12]}"
    user, address = MARIADB_ADMIN.rsplit("@", 1)
    host, port = address.rsplit(":", 1)

    def admin(sql: str) -> None:
        with pymysql.connect(host=host, port=int(port), user=user, autocommit=True) as conn:
            conn.cursor().execute(sql)

    admin(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    try:
        yield f"mysql+pymysql://{MARIADB_ADMIN}/{name}"
    finally:
        admin(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    """A fresh, empty MariaDB database for one test."""
    yield from _mariadb_database()


@pytest.fixture(scope="session")
def mariadb_url_shared() -> Iterator[str]:
    """One MariaDB database for a whole test session (tests must use their own session ids)."""
    yield from _mariadb_database()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    yield from _pg_database()


@pytest.fixture(scope="session")
def pg_url_shared() -> Iterator[str]:
    """One PostgreSQL database for a whole test session (tests must use their own session ids)."""
    yield from _pg_database()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


SQL_BACKENDS = ("sqlite", "postgres", "mariadb")
"""The SQL ledgers every SQL-only suite runs on."""


def sql_url(request: pytest.FixtureRequest, backend: str, *, shared: bool = False) -> str:
    """A database of `backend` ("sqlite", "postgres" or "mariadb") for this test: a fresh one, or
    with `shared` the run's shared one (tests then use their own session ids; SQLite's is always
    the test's own file)."""
    fresh, run_wide = {
        "sqlite": ("sqlite_url", "sqlite_url"),
        "postgres": ("pg_url", "pg_url_shared"),
        "mariadb": ("mariadb_url", "mariadb_url_shared"),
    }[backend]
    return request.getfixturevalue(run_wide if shared else fresh)


def backend_url(request: pytest.FixtureRequest, backend: str, *, shared: bool = False) -> str:
    """A ledger URL of `backend` for this test: `memory://` for "memory", else `sql_url`'s."""
    return "memory://" if backend == "memory" else sql_url(request, backend, shared=shared)


@pytest.fixture(params=["memory", "sqlite", "postgres", "mariadb"])
def database_url(request) -> str:
    """Each contract test runs against the four backends."""
    return backend_url(request, request.param, shared=True)


pytest_plugins = ["tests.fakes.fake_openai", "tests.fakes.embedded_pgvector"]
