"""The composition root: settings in, wired adapters out (`open_service()`, `open_storage()`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.ports import CounterStore, LeaseStore, RedeliveryCounts, RelayPositions
from sessionledger.infrastructure.ledger.counters import MemoryCounterStore, SqlCounterStore
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.ledger.leases import MemoryLeaseStore, SqlLeaseStore
from sessionledger.infrastructure.ledger.memory import MemoryLedger
from sessionledger.infrastructure.ledger.migrate import upgrade
from sessionledger.infrastructure.ledger.redeliveries import MemoryRedeliveryCounts, SqlRedeliveryCounts
from sessionledger.infrastructure.ledger.relay_positions import MemoryRelayPositions, SqlRelayPositions
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
    return open_storage(Settings(**overrides)).service


@dataclass(frozen=True)
class Storage:
    """One database as the workers use it: the service on its ledger, and what the workers keep
    beside that ledger (on the same engine, or in the same memory); close it (or use `with`)."""

    service: SessionService
    leases: LeaseStore
    relay_positions: RelayPositions
    counters: CounterStore
    redeliveries: RedeliveryCounts

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_storage(settings: Settings) -> Storage:
    """The service on the ledger the settings name (counting tokens for their model), and the
    workers' stores built on the same engine (or the same in-memory ledger), the schema up to date."""
    counter = counter_for(settings.model)
    if settings.database_url == MEMORY_URL:
        memory = MemoryLedger()
        return Storage(
            SessionService(memory, settings, counter),
            MemoryLeaseStore(memory),
            MemoryRelayPositions(memory),
            MemoryCounterStore(),
            MemoryRedeliveryCounts(),
        )
    engine = open_engine(settings)
    return Storage(
        SessionService(SqlLedger(engine), settings, counter),
        SqlLeaseStore(engine),
        SqlRelayPositions(engine),
        SqlCounterStore(engine),
        SqlRedeliveryCounts(engine),
    )


def open_engine(settings: Settings) -> sa.Engine:
    """An engine on the database the settings name, its schema brought up to date."""
    engine = create_ledger_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        statement_timeout=settings.statement_timeout,
    )
    try:
        upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine
