"""LangGraph on the ledger (`pip install 'sessionledger[langgraph]'`): `LedgerSaver`, a checkpointer,
and `LedgerStore`, a long-term memory store.

Each name is imported on first use, so that importing one class loads neither the other nor
what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionledger.domain.lazy_names import lazy_names

if TYPE_CHECKING:
    from sessionledger.infrastructure.langgraph.saver import LedgerSaver
    from sessionledger.infrastructure.langgraph.store import LedgerStore

__all__ = ["LedgerSaver", "LedgerStore"]


__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "LedgerSaver": "sessionledger.infrastructure.langgraph.saver",
        "LedgerStore": "sessionledger.infrastructure.langgraph.store",
    },
    __all__,
)
