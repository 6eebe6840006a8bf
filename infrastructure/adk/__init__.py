"""google-adk's session service over the ledger (`pip install 'sessionledger[adk]'`).

`LedgerSessionService` is imported on first use, so that `adk.ids` (which the command line
reads to name an ADK session) needs neither google-adk nor the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionledger.domain.lazy_names import lazy_names

if TYPE_CHECKING:
    from sessionledger.infrastructure.adk.service import LedgerSessionService

__all__ = ["LedgerSessionService"]


__getattr__, __dir__ = lazy_names(
    __name__, {"LedgerSessionService": "sessionledger.infrastructure.adk.service"}, __all__
)
