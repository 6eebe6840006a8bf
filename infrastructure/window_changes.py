"""Window changes an adapter asks for (`pop_item`, `clear`): compactions, so the ledger keeps what leaves.

openai-agents' `pop_item` / `clear_session` and LangChain's `clear()` forget part or all of the
active window while the events stay in the ledger (archived: searchable, replayable, verified)
with the record of the change. Each is a compaction the caller applies with `change_window`.
"""

from __future__ import annotations

import itertools
import random
import time

from sessionledger.domain.compaction import CompactionRequest, CompactionResult
from sessionledger.domain.compaction.ports import Strategy
from sessionledger.domain.errors import ConcurrencyConflict, SessionNotFound
from sessionledger.infrastructure.service import SessionService


class WindowNotEmpty:
    """The trigger of a window change: there is something to remove."""

    def should_compact(self, request: CompactionRequest) -> bool:
        return bool(request.events)


class PopItem:
    """The newest event leaves the window (it stays in the ledger)."""

    def compact(self, request: CompactionRequest) -> CompactionResult:
        return CompactionResult(request.events[:-1], request.events[-1:])


class ClearSession:
    """Every event leaves the window (it stays in the ledger)."""

    def compact(self, request: CompactionRequest) -> CompactionResult:
        return CompactionResult((), request.events)


def change_window(
    service: SessionService, session_id: str, change: Strategy, user_id: str | None
) -> CompactionResult | None:
    """Apply `change` to the window as a compaction; `None` for an unknown session (`ValueError`
    for another user's, as `compact` says).

    Changes racing each other lose compaction races, and each loss means another one won, so a
    change is retried (after a short random pause) until it is applied."""
    for attempt in itertools.count(1):
        try:
            return service.compact(session_id, WindowNotEmpty(), change, user_id=user_id)
        except SessionNotFound:
            return None
        except ConcurrencyConflict:
            time.sleep(random.uniform(0, min(0.001 * attempt, 0.05)))
    raise AssertionError("unreachable")
