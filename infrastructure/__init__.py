"""Adapters: the ledgers, the service built on them, and `open_service()` to wire it all.

Each name is imported on first use, so that importing one adapter module (the settings, the
redaction of URLs) does not load every other one: the command line's `--help` and its reading
commands stay clear of the queue stack (kombu, Celery) and the schema migrations (alembic).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    """Import a name's module on first use and keep the name, so later lookups are plain reads."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
