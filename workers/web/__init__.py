"""The audit page (`sessionledger serve`): a read-only web application over the ledger's audit reads."""

from sessionledger.workers.web.app import audit_app

__all__ = ["audit_app"]
