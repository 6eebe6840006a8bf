"""`LoopAppends`: the HTTP session API's common append sent from the event loop, its token check
included: two round trips on the loop's own connections (`ledger/async_append.py`) and no hop to a
thread.

The API checks the bearer token on every append (no cache: a revoked token is refused at its next
request) and then appends; on a thread that was one hop around both, which with the token's read
was a fifth of an append over HTTP. Here the token's read is the store's own statement
(`SqlAccessTokens.find_statement`) and the append `AsyncAppend`'s, made by the synchronous path's
own code: what the loop cannot do (no loop connection, a head not cached or moved, a state delta,
a duplicate id, an error) is answered "not here", and the caller makes the whole request on the
synchronous path, which holds every rule.
"""

from __future__ import annotations

from sessionledger.domain.access import StoredToken
from sessionledger.domain.events import SessionEvent
from sessionledger.infrastructure.ledger.access_tokens import SqlAccessTokens
from sessionledger.infrastructure.ledger.async_append import AsyncAppend
from sessionledger.infrastructure.service import AppendSteps

__all__ = ["LoopAppends", "NotRead"]


class NotRead(Exception):
    """The loop could not read the token (no connection of its own, or the read failed)."""


class LoopAppends:
    """A token's read and a one-event append, each sent on a connection of the running loop."""

    def __init__(self, fast: AsyncAppend, tokens: SqlAccessTokens, steps: AppendSteps) -> None:
        self._fast = fast
        self._tokens = tokens
        self._steps = steps

    async def find_token(self, token_id: str) -> StoredToken | None:
        """`AccessTokens.find`, read on the loop; `NotRead` when it could not be."""
        rows = await self._fast.read(*self._tokens.find_statement(token_id))
        if rows is None:
            raise NotRead(token_id)
        return self._tokens.found(token_id, rows)

    async def append_event(self, event: SessionEvent, expected_version: int | None) -> bool:
        """Whether the event was stored here (`SessionService.append_event`'s checks and statement,
        without its owner check: the caller's). `False`: not stored here, and the caller appends it
        on the synchronous path, which also finds it stored if this append's answer was lost."""
        made = await self._fast.append(lambda: self._steps.draft_event(event, expected_version))
        if made is None or made[1] is None:
            return False
        self._steps.announce(event.session_id, made[1])
        return True

    def close(self) -> None:
        self._fast.close()
