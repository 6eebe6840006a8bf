"""`SHARED`: one `AsyncSessionService` per durable ledger and settings in a process, for the
adapters whose objects are made per conversation or per call (openai-agents' `LedgerSession`,
LangChain's `LedgerChatMessageHistory`, which `RunnableWithMessageHistory` makes for every call).

Why: each such object opening a service of its own opened an engine and its connections, and one
that was never closed (as LangChain never closes its histories) kept them: the server ran out of
connections after a few dozen calls. The service closes with the last object released from it, and
stays open while one is never released. `memory://` is a fresh ledger per object, as
`open_service` says.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from sessionledger.infrastructure.async_service import AsyncSessionService, open_async_service
from sessionledger.infrastructure.settings import MEMORY_URL

__all__ = ["SHARED", "SharedServices"]


class SharedServices:
    """The services shared in this process, each with the number of objects holding it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: dict[str, tuple[AsyncSessionService, int]] = {}

    def acquire(
        self, database_url: str | None, options: Mapping[str, Any], broker_url: str | None = None
    ) -> AsyncSessionService:
        """The service of `open_async_service(database_url, broker_url=..., **options)`: the one
        already shared for those settings, else this one, shared from now on (it opens lazily, so
        making one to find its settings costs no connection)."""
        service = open_async_service(database_url, broker_url=broker_url, **options)
        if service.settings.database_url == MEMORY_URL:
            return service
        key = service.settings.model_dump_json()
        with self._lock:
            shared, holders = self._services.get(key, (service, 0))
            self._services[key] = (shared, holders + 1)
        return shared

    def release(self, service: AsyncSessionService) -> bool:
        """One holder of `service` lets go: whether it was the last (the caller then closes it)."""
        key = service.settings.model_dump_json()
        with self._lock:
            shared, holders = self._services.get(key, (service, 1))
            if shared is not service:  # never shared (`memory://`): its one holder
                return True
            if holders > 1:
                self._services[key] = (shared, holders - 1)
                return False
            self._services.pop(key, None)
            return True


SHARED = SharedServices()
