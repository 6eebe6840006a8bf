"""The composition root says which ledger has an append from the event loop (the async service
takes it from `Storage.async_append`, never by testing the ledger's class): PostgreSQL's and
MariaDB's (MySQL's) only."""

from __future__ import annotations

from sessionledger.infrastructure.bootstrap import Storage
from sessionledger.infrastructure.ledger.async_append import AsyncAppend


def test_only_postgresql_and_mariadb_storage_offer_the_event_loop_append(
    storage: Storage, database_url: str
) -> None:
    appender = storage.async_append(5.0, 2)
    assert isinstance(appender, AsyncAppend) is database_url.startswith(("postgresql", "mysql"))
