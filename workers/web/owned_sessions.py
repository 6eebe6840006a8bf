"""`OwnedSessions`: the ledger ids the session API has found to be its user's session of its app, so
an append checks its session's owner once, not on every call (a read of 0.2-0.5 ms beside an
append of 2-4 ms).

What is kept stays true: a session's id, user and app never change, a session id spells its app and
user (`infrastructure.adk.ids`), and a deleted session's id is never used again. A session deleted
since it was found is refused by the append itself, whose statement moves only a live session's
head (`SessionNotFound`, a 404). Only sessions found to be the user's are kept (anything else is
read again next time), at most `size`, the least recently used dropped first.
"""

from __future__ import annotations

from sessionledger.infrastructure.recently_used import RecentlyUsed

__all__ = ["OwnedSessions"]


class OwnedSessions:
    """The ledger ids found to be their user's session of their app (`RecentlyUsed`: bounded, safe
    to share between threads)."""

    def __init__(self, size: int = 10_000) -> None:
        self._found: RecentlyUsed[str, bool] = RecentlyUsed(size)

    def knows(self, ledger_id: str) -> bool:
        """Whether the ledger id was found to be its user's session of its app (kept for longer)."""
        return self._found.get(ledger_id) is not None

    def add(self, ledger_id: str) -> None:
        self._found.put(ledger_id, True)
