"""A fresh PostgreSQL database per benchmark run, dropped afterwards (as tests/conftest.py does)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

ADMIN_URL = os.environ.get("SESSIONLEDGER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextmanager
def fresh_postgres(prefix: str = "sl_bench") -> Iterator[str]:
    """Yields the new database's libpq URL (`postgresql://...`; `open_service` accepts it as is)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
