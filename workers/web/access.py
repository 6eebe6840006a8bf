"""Who is asking: the token of a request (`Authorization: Bearer`, or the login cookie) and its grant.

The grant is a FastAPI dependency, so every route, the audit pages' and (later) the HTTP session
API's, asks for it the same way; a right beyond reading is a field of `Grant` that a route checks.
A missing or unknown token is `SignedOut`: the application answers a page with a redirect to
`/login` and JSON with 401, so nothing a route shows is reached without a grant.
"""

from __future__ import annotations

from fastapi import Request
from sessionledger.domain.access import Grant
from sessionledger.workers.bearer import bearer_token, grant_for

__all__ = ["COOKIE", "SignedOut", "requested_grant"]

COOKIE = "sessionledger_token"
"""The login cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it)."""


class SignedOut(Exception):
    """The request carries no token that opens anything."""


def requested_grant(request: Request) -> Grant:
    """The dependency: the grant of the request's bearer token, else of its login cookie."""
    token = bearer_token(request.headers.get("authorization", "")) or request.cookies.get(COOKIE, "")
    grant = grant_for(request.app.state.tokens, token) if token else None
    if grant is None:
        raise SignedOut()
    return grant
