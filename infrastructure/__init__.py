"""Adapters: the ledgers, the service built on them, and `open_service()` to wire it all.

Each name is imported on first use, so that importing one adapter module (the settings, the
redaction of URLs) does not load every other one: the command line's `--help` and its reading
commands stay clear of the queue stack (kombu, Celery) and the schema migrations (alembic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionledger.domain.lazy_names import lazy_names

if TYPE_CHECKING:
    from sessionledger.infrastructure.async_service import AsyncSessionService, open_async_service
    from sessionledger.infrastructure.bootstrap import open_service
    from sessionledger.infrastructure.publisher import EventPublisher
    from sessionledger.infrastructure.service import SessionService
    from sessionledger.infrastructure.settings import Settings

_HOMES = {
    "AsyncSessionService": "sessionledger.infrastructure.async_service",
    "open_async_service": "sessionledger.infrastructure.async_service",
    "open_service": "sessionledger.infrastructure.bootstrap",
    "EventPublisher": "sessionledger.infrastructure.publisher",
    "SessionService": "sessionledger.infrastructure.service",
    "Settings": "sessionledger.infrastructure.settings",
}

__all__ = [
    "AsyncSessionService",
    "EventPublisher",
    "SessionService",
    "Settings",
    "open_async_service",
    "open_service",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
