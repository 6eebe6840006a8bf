"""google-adk's session service over the ledger (`pip install 'sessionledger[adk]'`).

`LedgerSessionService` is imported on first use, so that `adk.ids` (which the command line
reads to name an ADK session) needs neither google-adk nor the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionledger.infrastructure.adk.service import LedgerSessionService

__all__ = ["LedgerSessionService"]


def __getattr__(name: str) -> Any:
    if name != "LedgerSessionService":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from sessionledger.infrastructure.adk.service import LedgerSessionService

    globals()[name] = LedgerSessionService
    return LedgerSessionService
