"""Compaction's ports: the summarizer, the trigger and the strategy, which users and adapters implement.

They live beside the compaction rules that call them, so the ledger's ports (`domain.ports`) and
compaction import each other in one direction only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sessionledger.domain.compaction.request import CompactionRequest
    from sessionledger.domain.compaction.result import CompactionResult


@runtime_checkable
class Summarizer(Protocol):
    """Turns a prompt into a summary; `None` or blank means "no summary"."""

    def summarize(self, system_prompt: str, user_prompt: str) -> str | None: ...


class Trigger(Protocol):
    """Decides *when* to compact: anything with this method is a trigger (duck-typed)."""

    def should_compact(self, request: CompactionRequest) -> bool: ...


class Strategy(Protocol):
    """Decides *what* compaction keeps, summarizes and archives: anything with this method is one."""

    def compact(self, request: CompactionRequest) -> CompactionResult: ...
