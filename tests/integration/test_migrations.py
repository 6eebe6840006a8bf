"""The Alembic migrations build exactly the schema `infrastructure.ledger.schema` declares, and an
older database upgrades in place without losing what it holds."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.ledger.migrate import _config, current_revision, head_revision, upgrade
from sessionledger.infrastructure.ledger.schema import metadata


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def test_the_written_head_revision_is_alembics_head() -> None:
    """Opening a ledger compares its revision with `head_revision()` without loading alembic: a new
    migration must move that constant too, or writers would skip it and readers refuse the result."""
    assert head_revision() == ScriptDirectory.from_config(_config()).get_current_head()


def test_migrated_schema_matches_the_declared_tables(fresh_url: str) -> None:
    engine = create_ledger_engine(fresh_url)
    try:
        upgrade(engine)
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), metadata)
            assert current_revision(connection) == head_revision()
    finally:
        engine.dispose()
    assert differences == []


def test_counters_a_worker_created_before_0002_survive_the_upgrade(fresh_url: str) -> None:
    engine = create_ledger_engine(fresh_url)
    try:
        with engine.begin() as connection:  # the schema as 0001 left it, plus the worker's own table
            config = _config()
            config.attributes["connection"] = connection
            command.upgrade(config, "0001")
            connection.execute(
                sa.text("CREATE TABLE worker_counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)")
            )
            connection.execute(sa.text("INSERT INTO worker_counters VALUES ('events_ingested', 42)"))
        upgrade(engine)
        with engine.connect() as connection:
            assert current_revision(connection) == head_revision() != "0001"
            stored = connection.execute(sa.text("SELECT name, value FROM worker_counters")).all()
    finally:
        engine.dispose()
    assert stored == [("events_ingested", 42)]


def test_payloads_are_compressed_with_lz4_from_0004_and_older_pglz_rows_still_read(pg_url: str) -> None:
    """0004 changes only the setting: a long payload stored before it stays pglz, one stored after
    is lz4, and both read back and verify as they were appended."""
    before, after = (
        f"{name}: " + "a long model answer, compressed when stored. " * 200 for name in ("a", "b")
    )
    engine = create_ledger_engine(pg_url)
    try:
        with open_service(pg_url) as service:
            session = service.create_session("alice", app_name="app")
            _migrate(engine, "0003")  # the schema before 0004
            service.append_message(session.id, UserMessage(before))
            _migrate(engine, "0004")
            service.append_message(session.id, UserMessage(after))
            assert [m.text for m in service.get_messages(session.id)] == [before, after]
            assert verify(service, session.id).ok
        with engine.connect() as connection:
            stored = connection.execute(
                sa.text(
                    "SELECT pg_column_compression(payload) FROM ledger"
                    " WHERE session_id = :sid AND kind = 'event' ORDER BY position"
                ),
                {"sid": session.id},
            ).scalars()
            assert list(stored) == ["pglz", "lz4"]
    finally:
        engine.dispose()


def _migrate(engine: sa.Engine, revision: str) -> None:
    """Up or down to `revision`."""
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        now = current_revision(connection)
        if now is not None and now > revision:
            command.downgrade(config, revision)
        else:
            command.upgrade(config, revision)
