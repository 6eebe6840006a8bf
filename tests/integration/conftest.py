"""Fixtures for the integration suites: the session service or the workers' stores on each backend,
and reopening them."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sessionledger.infrastructure import AsyncSessionService, SessionService, Settings, open_service
from sessionledger.infrastructure import async_service as async_service_module
from sessionledger.infrastructure.bootstrap import Storage, open_storage
from sessionledger.infrastructure.vectors.keyed import beside_ledger

from tests.integration.replication import ReplicatedPair, start_pair


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    """The session service on memory, SQLite and PostgreSQL in turn."""
    with open_service(database_url) as opened:
        yield opened


@pytest.fixture
def lazy_opens(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads on which async services opened their ledgers (`open_async_service` opens at
    first use), in order: for the adapters that must never open one on an event loop."""
    opened_on: list[int] = []
    opening = async_service_module.open_storage

    def recorded(*args: Any, **kwargs: Any) -> Any:
        opened_on.append(threading.get_ident())
        return opening(*args, **kwargs)

    monkeypatch.setattr(async_service_module, "open_storage", recorded)
    return opened_on


@pytest.fixture
def pool_hops(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The calls async services hand to their thread pool (`AsyncSessionService.run`), in order:
    empty while the appends go out from the event loop itself."""
    hops: list[object] = []
    run = AsyncSessionService.run

    async def counted(self: AsyncSessionService, call: Any) -> Any:
        hops.append(call)
        return await run(self, call)

    monkeypatch.setattr(AsyncSessionService, "run", counted)
    return hops


@pytest.fixture
def storage(database_url: str) -> Iterator[Storage]:
    """The service and the workers' stores on memory, SQLite and PostgreSQL in turn."""
    with open_storage(Settings(database_url=database_url)) as opened:
        yield opened


@pytest.fixture
def reopen(database_url: str) -> Iterator[Callable[[], Storage]]:
    """Open the same database again, as another process or a restart would (SQL backends only)."""
    if database_url == "memory://":
        pytest.skip("an in-memory store lives only as long as its object")
    opened: list[Storage] = []

    def open_again() -> Storage:
        opened.append(open_storage(Settings(database_url=database_url)))
        return opened[-1]

    yield open_again
    for again in opened:
        again.close()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Makes names no other test uses (the PostgreSQL database is shared by the whole run)."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def vectors_url(database_url: str, request: pytest.FixtureRequest) -> str:
    """Where an indexed `LedgerStore` keeps its keyed vectors: where it would by default (memory,
    the file beside a SQLite ledger), or, as this machine's PostgreSQL has no pgvector, on the
    pgvector server."""
    if database_url.startswith("postgresql"):
        return str(request.getfixturevalue("pgvector_url"))
    return beside_ledger(database_url)


@pytest.fixture(scope="session")
def replicated_pair(request: pytest.FixtureRequest) -> ReplicatedPair:
    """A private PostgreSQL primary and hot standby (`replication.py`), started once for the test
    session and only when a selected test asks for it; stopped and removed at its end."""
    pair = start_pair()
    request.addfinalizer(pair.close)
    return pair


@pytest.fixture
def replicated_database(replicated_pair: ReplicatedPair) -> Iterator[tuple[str, str]]:
    """A fresh database on the private primary: its URL there and on the standby; dropped after."""
    name = f"sl_replica_{uuid.uuid4().hex[:10]}"
    replicated_pair.create_database(name)
    try:
        yield replicated_pair.primary.url(name), replicated_pair.standby.url(name)
    finally:
        replicated_pair.drop_database(name)
