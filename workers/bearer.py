"""The one check of an access token, for every HTTP server of ours (`serve`, `mcp --http`)."""

from __future__ import annotations

from sessionledger.domain.access import Grant, StoredToken, parse_token
from sessionledger.domain.ports import AccessTokens

__all__ = ["bearer_token", "grant_for", "granted", "token_parts"]


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer TOKEN` header; empty for any other scheme or none.
    (A web framework is not needed to read one header, so `mcp --http` does not need the web extra.)"""
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def grant_for(tokens: AccessTokens, token: str) -> Grant | None:
    """The grant of `token`: `None` for text that is not a token, an unknown or revoked one, or a
    wrong secret (all alike, so an answer tells a guesser nothing)."""
    parts = token_parts(token)
    return None if parts is None else granted(tokens.find(parts[0]), parts[1])


def token_parts(token: str) -> tuple[str, str] | None:
    """A token's id and secret, `None` for text that is not a token: `grant_for`'s first step, for a
    caller that finds the stored token itself (the session API, on its event loop)."""
    try:
        return parse_token(token)
    except ValueError:
        return None


def granted(stored: StoredToken | None, secret: str) -> Grant | None:
    """The grant of the stored token when `secret` is its own: `grant_for`'s last step."""
    return stored.grant if stored is not None and stored.accepts(secret) else None
