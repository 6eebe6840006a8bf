"""The composition root: settings in, a wired service out (`open_service`, CONTRACT.md §2)."""

from __future__ import annotations

from typing import Any

from sessionledger.domain.ports import Ledger
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.ledger.memory import MemoryLedger
from sessionledger.infrastructure.ledger.migrate import upgrade
from sessionledger.infrastructure.ledger.sql import SqlLedger
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settings import MEMORY_URL, Settings
from sessionledger.infrastructure.tokens import counter_for


def open_service(
    database_url: str | None = None, *, broker_url: str | None = None, **options: Any
) -> SessionService:
    """A ready service: the schema is created or migrated on open; close it (or use `with`).

    `database_url=None` takes `SESSIONLEDGER_DATABASE_URL`, else the embedded default (the SQLite
    file `./sessionledger.db`); `"memory://"` is a fresh, empty in-memory store on every open.
    `options` override any `Settings` field by name (e.g. `max_payload_bytes=...`).
    """
    overrides = dict(options)
    if database_url is not None:
        overrides["database_url"] = database_url
    if broker_url is not None:
        overrides["broker_url"] = broker_url
    return build_service(Settings(**overrides))


def build_service(settings: Settings) -> SessionService:
    """The service those settings describe: its ledger, and the token counter of their model."""
    return SessionService(open_ledger(settings), settings, counter_for(settings.model))


def open_ledger(settings: Settings) -> Ledger:
    """The ledger the settings name, its schema brought up to date."""
    if settings.database_url == MEMORY_URL:
        return MemoryLedger()
    engine = create_ledger_engine(
        settings.database_url, pool_size=settings.pool_size, busy_timeout_ms=settings.sqlite_busy_timeout_ms
    )
    try:
        upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return SqlLedger(engine)
