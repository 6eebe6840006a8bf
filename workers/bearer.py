"""The one check of an access token, for every HTTP server of ours (`serve`, `mcp --http`)."""

from __future__ import annotations

from sessionledger.domain.access import Grant, parse_token
from sessionledger.domain.ports import AccessTokens

__all__ = ["bearer_token", "grant_for"]


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer TOKEN` header; empty for any other scheme or none.
    (A web framework is not needed to read one header, so `mcp --http` does not need the web extra.)"""
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def grant_for(tokens: AccessTokens, token: str) -> Grant | None:
    """The grant of `token`: `None` for text that is not a token, an unknown or revoked one, or a
    wrong secret (all alike, so an answer tells a guesser nothing)."""
    try:
        token_id, secret = parse_token(token)
    except ValueError:
        return None
    stored = tokens.find(token_id)
    return stored.grant if stored is not None and stored.accepts(secret) else None
