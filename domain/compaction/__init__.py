"""Compaction: triggers decide when, strategies decide what (pure; no I/O).

Semantics follow Spring AI Session v0.7.0 (docs/api.md "Compaction"), with Sentinel's
context-window rule and google-adk's event-count, sliding-window and token-threshold compactions
added.
"""

from sessionledger.domain.compaction.models import context_window_for
from sessionledger.domain.compaction.ports import Summarizer
from sessionledger.domain.compaction.prompts import (
    ADK_SYSTEM_PROMPT,
    DEFAULT_SHADOW_PROMPT,
    DEFAULT_SYSTEM_PROMPT,
)
from sessionledger.domain.compaction.request import CompactionRequest
from sessionledger.domain.compaction.result import CompactionResult
from sessionledger.domain.compaction.strategies import (
    AdkSlidingWindowStrategy,
    AdkTokenThresholdStrategy,
    RecursiveSummarizationStrategy,
    SlidingWindowStrategy,
    TokenCountStrategy,
    TurnWindowStrategy,
)
from sessionledger.domain.compaction.triggers import (
    AnyOf,
    ContextWindowTrigger,
    EventCountTrigger,
    TokenCountTrigger,
    TurnCountTrigger,
)

__all__ = [
    "ADK_SYSTEM_PROMPT",
    "DEFAULT_SHADOW_PROMPT",
    "DEFAULT_SYSTEM_PROMPT",
    "AdkSlidingWindowStrategy",
    "AdkTokenThresholdStrategy",
    "AnyOf",
    "CompactionRequest",
    "CompactionResult",
    "ContextWindowTrigger",
    "EventCountTrigger",
    "RecursiveSummarizationStrategy",
    "SlidingWindowStrategy",
    "Summarizer",
    "TokenCountStrategy",
    "TokenCountTrigger",
    "TurnCountTrigger",
    "TurnWindowStrategy",
    "context_window_for",
]
