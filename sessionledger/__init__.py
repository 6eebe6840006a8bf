"""sessionledger: an event-sourced session ledger for LLM agents.

The names users need most, in one place, each imported from its module on first use: the domain's
(pure), and the adapters' (`open_service`, `open_async_service`, `EventPublisher`,
`SessionService`, `AsyncSessionService`), so that importing the domain alone never loads
SQLAlchemy, kombu or Celery, and a program that needs none of them (the command line's
`--version`) pays for none. This package is imported before any of its subpackages, so it is where
the domain's fallback token counter (for a `CompactionRequest` built by hand) is plugged in:
tiktoken's for the default model, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionledger.domain.lazy_names import lazy_names
from sessionledger.domain.tokens import use_fallback_counter

if TYPE_CHECKING:
    from sessionledger.domain import (
        AssistantMessage,
        ConcurrencyConflict,
        EventFilter,
        MatchMode,
        Message,
        MessageType,
        Session,
        SessionEvent,
        SessionExists,
        SessionNotFound,
        SystemMessage,
        ToolCall,
        ToolResponse,
        ToolResponseMessage,
        UserMessage,
        format_event,
        from_openai,
        to_openai,
        turns,
    )
    from sessionledger.domain.compaction import (
        AnyOf,
        CompactionRequest,
        CompactionResult,
        ContextWindowTrigger,
        EventCountTrigger,
        RecursiveSummarizationStrategy,
        SlidingWindowStrategy,
        TokenCountStrategy,
        TokenCountTrigger,
        TurnCountTrigger,
        TurnWindowStrategy,
    )
    from sessionledger.domain.tokens import TokenCounter
    from sessionledger.infrastructure import (
        AsyncSessionService,
        EventPublisher,
        SessionService,
        open_async_service,
        open_service,
    )

__version__ = "0.1.0"

_DOMAIN = (
    "AssistantMessage ConcurrencyConflict EventFilter MatchMode Message MessageType Session SessionEvent "
    "SessionExists SessionNotFound SystemMessage ToolCall ToolResponse ToolResponseMessage UserMessage "
    "format_event from_openai to_openai turns"
)
_COMPACTION = (
    "AnyOf CompactionRequest CompactionResult ContextWindowTrigger EventCountTrigger "
    "RecursiveSummarizationStrategy SlidingWindowStrategy TokenCountStrategy TokenCountTrigger "
    "TurnCountTrigger TurnWindowStrategy"
)
_ADAPTERS = "AsyncSessionService EventPublisher SessionService open_async_service open_service"
_HOMES = {
    **dict.fromkeys(_DOMAIN.split(), "sessionledger.domain"),
    **dict.fromkeys(_COMPACTION.split(), "sessionledger.domain.compaction"),
    **dict.fromkeys(_ADAPTERS.split(), "sessionledger.infrastructure"),
}

__all__ = [
    "AnyOf",
    "AssistantMessage",
    "AsyncSessionService",
    "CompactionRequest",
    "CompactionResult",
    "ConcurrencyConflict",
    "ContextWindowTrigger",
    "EventCountTrigger",
    "EventFilter",
    "EventPublisher",
    "MatchMode",
    "Message",
    "MessageType",
    "RecursiveSummarizationStrategy",
    "Session",
    "SessionEvent",
    "SessionExists",
    "SessionNotFound",
    "SessionService",
    "SlidingWindowStrategy",
    "SystemMessage",
    "TokenCountStrategy",
    "TokenCountTrigger",
    "ToolCall",
    "ToolResponse",
    "ToolResponseMessage",
    "TurnCountTrigger",
    "TurnWindowStrategy",
    "UserMessage",
    "__version__",
    "format_event",
    "from_openai",
    "open_async_service",
    "open_service",
    "to_openai",
    "turns",
]


def _tiktoken_counter() -> TokenCounter:
    from sessionledger.infrastructure.settings import DEFAULT_MODEL
    from sessionledger.infrastructure.tokens import counter_for

    return counter_for(DEFAULT_MODEL)


use_fallback_counter(_tiktoken_counter)


__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
