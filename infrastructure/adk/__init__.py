"""google-adk's session service over the ledger (`pip install 'sessionledger[adk]'`)."""

from sessionledger.infrastructure.adk.service import LedgerSessionService

__all__ = ["LedgerSessionService"]
