"""`open_storage(settings, create=False)`, what reading commands open: an existing ledger at this
version's schema, read-only; no ledger, or an older one, is `NoLedger`, and nothing is created,
migrated or written on the way, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3

import psycopg
import pymysql
import pytest
import sqlalchemy as sa
from alembic import command as alembic
from sessionledger.domain import UserMessage
from sessionledger.infrastructure.bootstrap import NoLedger, open_storage
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.ledger.migrate import _config, current_revision
from sessionledger.infrastructure.settings import Settings

from tests.conftest import SQL_BACKENDS, sql_url

WRITE_REFUSED = (sa.exc.DBAPIError, psycopg.Error, pymysql.Error, sqlite3.Error)


@pytest.fixture(params=SQL_BACKENDS)
def empty_url(request) -> str:
    """A place with no ledger yet: a SQLite file not created, an empty PostgreSQL database."""
    return sql_url(request, request.param)


def _tables(url: str) -> list[str]:
    engine = create_ledger_engine(url, read_only=True)
    try:
        return sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_no_ledger_is_no_ledger_and_stays_none(empty_url: str, tmp_path) -> None:
    with pytest.raises(NoLedger, match="no ledger at"):
        open_storage(Settings(database_url=empty_url), create=False)
    if empty_url.startswith("sqlite"):
        assert list(tmp_path.iterdir()) == [], "the SQLite file was created"
    else:
        assert _tables(empty_url) == [], "a schema was created"


def test_an_existing_ledger_is_read_and_never_written(empty_url: str) -> None:
    settings = Settings(database_url=empty_url)
    with open_storage(settings) as writer:
        session = writer.service.create_session("alice")
        writer.service.append_message(session.id, UserMessage("hello"))
    with open_storage(settings, create=False) as reader:
        assert [m.text for m in reader.service.get_messages(session.id)] == ["hello"]
        with pytest.raises(WRITE_REFUSED):
            reader.service.append_message(session.id, UserMessage("not from a reader"))
        with pytest.raises(WRITE_REFUSED):
            reader.service.create_session("bob")
    with open_storage(settings) as writer:
        assert [m.text for m in writer.service.get_messages(session.id)] == ["hello"]
        assert writer.service.list_sessions("bob") == []


def test_an_older_schema_is_left_for_migrate(empty_url: str) -> None:
    engine = create_ledger_engine(empty_url)
    try:
        with engine.begin() as connection:
            config = _config()
            config.attributes["connection"] = connection
            alembic.upgrade(config, "0002")
        with pytest.raises(NoLedger, match=r"schema revision 0002.*sessionledger migrate"):
            open_storage(Settings(database_url=empty_url), create=False)
        with engine.connect() as connection:
            assert current_revision(connection) == "0002"
    finally:
        engine.dispose()


def test_memory_is_an_empty_ledger_either_way() -> None:
    with open_storage(Settings(database_url="memory://"), create=False) as storage:
        assert storage.service.list_sessions("alice") == []
