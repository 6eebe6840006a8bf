"""Adapters: the ledgers, the service built on them, and `open_service()` to wire it all."""

from sessionledger.infrastructure.bootstrap import open_service
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settings import Settings

__all__ = ["EventPublisher", "SessionService", "Settings", "open_service"]
