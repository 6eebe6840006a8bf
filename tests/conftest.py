"""Shared fixtures: real databases for the backends the contract suite runs against."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

PG_ADMIN_URL = os.environ.get("SESSIONLEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


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


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def database_url(request) -> str:
    """Each contract test runs against the three backends."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url_shared")


pytest_plugins = ["tests.fakes.fake_openai", "tests.fakes.embedded_pgvector"]
