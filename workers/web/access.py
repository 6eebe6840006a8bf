"""Who is asking: the token of a request (`Authorization: Bearer`, or the login cookie) and its grant.

The grant is a FastAPI dependency, so every route, the audit pages' and (later) the HTTP session
API's, asks for it the same way; a right beyond reading is a field of `Grant` that a route checks.
A missing or unknown token is `SignedOut`: the application answers a page with a redirect to
`/login` and JSON with 401, so nothing a route shows is reached without a grant.
"""

from __future__ import annotations

from fastapi import Request
from sessionledger.domain.access import Grant, parse_token
from sessionledger.domain.ports import AccessTokens

__all__ = ["COOKIE", "SignedOut", "grant_for", "requested_grant"]

COOKIE = "sessionledger_token"
"""The login cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it)."""


class SignedOut(Exception):
    """The request carries no token that opens anything."""


def grant_for(tokens: AccessTokens, token: str) -> Grant | None:
    """The grant of `token`: `None` for text that is not a token, an unknown or revoked one, or a
    wrong secret (all alike, so an answer tells a guesser nothing)."""
    try:
        token_id, secret = parse_token(token)
    except ValueError:
        return None
    stored = tokens.find(token_id)
    return stored.grant if stored is not None and stored.accepts(secret) else None


def requested_grant(request: Request) -> Grant:
    """The dependency: the grant of the request's bearer token, else of its login cookie."""
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    token = credentials.strip() if scheme.lower() == "bearer" else request.cookies.get(COOKIE, "")
    grant = grant_for(request.app.state.tokens, token) if token else None
    if grant is None:
        raise SignedOut()
    return grant
