"""Adapters: the ledgers, the service built on them, and `open_service()` to wire it all."""

from sessionledger.infrastructure.async_service import AsyncSessionService, open_async_service
from sessionledger.infrastructure.bootstrap import open_service
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settings import Settings

__all__ = [
    "AsyncSessionService",
    "EventPublisher",
    "SessionService",
    "Settings",
    "open_async_service",
    "open_service",
]
