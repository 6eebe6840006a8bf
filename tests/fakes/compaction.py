"""Compaction test doubles shared by the integration and end-to-end tests."""

from __future__ import annotations

from typing import Any

from sessionledger.domain import AssistantMessage, SessionEvent
from sessionledger.domain.compaction import CompactionResult


class Always:
    """A trigger that always fires: the strategy decides what to archive."""

    def should_compact(self, request: Any) -> bool:
        return True


class SummarizeAllButTwo:
    """A strategy that archives everything but the last two window events behind one synthetic
    summary, reporting `tokens_saved`."""

    def __init__(self, tokens_saved: int = 0) -> None:
        self.tokens_saved = tokens_saved

    def compact(self, request: Any) -> CompactionResult:
        events = list(request.events)
        summary = SessionEvent(
            session_id=request.session.id,
            message=AssistantMessage(f"summary of {len(events) - 2}"),
            metadata={"synthetic": True, "compactionSource": "test"},
        )
        return CompactionResult((summary, *events[-2:]), tuple(events[:-2]), self.tokens_saved)
