"""Adapters: the ledgers, the service built on them, and `open_service()` to wire it all."""

from infrastructure.bootstrap import open_service
from infrastructure.publisher import EventPublisher
from infrastructure.service import SessionService
from infrastructure.settings import Settings

__all__ = ["EventPublisher", "SessionService", "Settings", "open_service"]
