"""`LoopAppends`: the HTTP session API's common append sent from the event loop, its token check
included, on the loop's own connections (`ledger/async_append.py`) and with no hop to a thread.

The API checks the bearer token on every append (a revoked token is refused at its next request).
The first append of a token reads it (`SqlAccessTokens.find_statement`) and then appends: two round
trips. A token that opened an append is remembered (`recently_used.py`): what is remembered never
changes (its id, user, admin and write flags, the sha256 of its secret; a token has no expiry),
and the secret is still compared with it at every request. What can change, its revocation, is
checked by the append's own statement (`Appends.one_statement`'s `live_token`): one round trip,
and a token revoked since it was remembered stores nothing, atomically. The append itself is
`AsyncAppend`'s, made by the synchronous path's own code: what the loop cannot do (no loop
connection, a head not cached or moved, a revoked token, a state delta, a duplicate id, an error)
is answered "not here", and the caller makes the whole request on the synchronous path, which
reads the token again and holds every rule.
"""

from __future__ import annotations

from sessionledger.domain.access import StoredToken
from sessionledger.domain.events import SessionEvent
from sessionledger.infrastructure.ledger.access_tokens import SqlAccessTokens
from sessionledger.infrastructure.ledger.async_append import AsyncAppend
from sessionledger.infrastructure.recently_used import RecentlyUsed
from sessionledger.infrastructure.service import AppendSteps

__all__ = ["LoopAppends", "NotRead"]


class NotRead(Exception):
    """The loop could not read the token (no connection of its own, or the read failed)."""


class LoopAppends:
    """A token's read and a one-event append, each sent on a connection of the running loop, and
    the tokens remembered between them."""

    def __init__(self, fast: AsyncAppend, tokens: SqlAccessTokens, steps: AppendSteps) -> None:
        self._fast = fast
        self._tokens = tokens
        self._steps = steps
        self._remembered: RecentlyUsed[str, StoredToken] = RecentlyUsed()  # tokens by id

    def remembered_token(self, token_id: str) -> StoredToken | None:
        """The token as read when it opened an append (`remember`), perhaps revoked since: only an
        append with `live_token` may rely on it."""
        return self._remembered.get(token_id)

    def remember(self, token: StoredToken) -> None:
        """Keep a token that opened an append (its secret checked), so its next append needs no read."""
        self._remembered.put(token.token_id, token)

    async def find_token(self, token_id: str) -> StoredToken | None:
        """`AccessTokens.find`, read on the loop; `NotRead` when it could not be."""
        rows = await self._fast.read(*self._tokens.find_statement(token_id))
        if rows is None:
            raise NotRead(token_id)
        return self._tokens.found(token_id, rows)

    async def append_event(
        self, event: SessionEvent, expected_version: int | None, live_token: str | None = None
    ) -> bool:
        """Whether the event was stored here (`SessionService.append_event`'s checks and statement,
        without its owner check: the caller's), while the token `live_token` is not revoked if
        given. `False`: not stored here, and the caller appends it on the synchronous path, which
        also finds it stored if this append's answer was lost; the token is then forgotten, so its
        next append reads it again."""
        made = await self._fast.append(lambda: self._steps.draft_event(event, expected_version), live_token)
        if made is None or made[1] is None:
            if live_token is not None:
                self._remembered.forget(live_token)
            return False
        self._steps.announce(event.session_id, made[1])
        return True

    def close(self) -> None:
        self._fast.close()
