"""LangChain over the ledger (`pip install 'sessionledger[langgraph]'`): a chat message history.

`LedgerChatMessageHistory` is imported on first use; `messages` converts langchain-core messages
to ledger events and back (the LangGraph saver stores a graph's `messages` channel with it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionledger.domain.lazy_names import lazy_names

if TYPE_CHECKING:
    from sessionledger.infrastructure.langchain.history import LedgerChatMessageHistory

__all__ = ["LedgerChatMessageHistory"]


__getattr__, __dir__ = lazy_names(
    __name__, {"LedgerChatMessageHistory": "sessionledger.infrastructure.langchain.history"}, __all__
)
