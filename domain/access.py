"""Access tokens for the audit page (and the HTTP API beside it): what a token grants, and how
a token is made and checked against what is stored of it.

A token is `sl_<id>_<secret>`: the id finds its row, the secret is stored only as its sha256 and
compared in constant time, so neither the database nor a timing difference gives a usable token
away. A grant names a user (whose sessions it reads), whether it is an admin's (every user's), and
whether it may write through the HTTP session API (create, append, delete; `token create --write`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

__all__ = ["PREFIX", "Grant", "StoredToken", "issue", "parse_token", "secret_digest"]

PREFIX = "sl_"
_ID_BYTES = 8
_ID_LENGTH = 2 * _ID_BYTES
_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class Grant:
    """What a token allows: reading `user_id`'s sessions, or every user's when `admin`; and with
    `write`, changing `user_id`'s own sessions through the HTTP session API (never another's)."""

    user_id: str
    admin: bool = False
    write: bool = False

    @property
    def reader(self) -> str | None:
        """The `user_id=` the service's reads take for this grant: `None` (no one in particular,
        so every session) for an admin, else the user (another user's session reads as unknown)."""
        return None if self.admin else self.user_id


@dataclass(frozen=True, slots=True)
class StoredToken:
    """What a store keeps of a token: its id, the sha256 (hex) of its secret, and its grant."""

    token_id: str
    secret_sha256: str
    grant: Grant
    created_at: datetime

    def accepts(self, secret: str) -> bool:
        """Whether `secret` is this token's, compared in constant time."""
        return hmac.compare_digest(secret_digest(secret), self.secret_sha256)


def issue(grant: Grant, now: datetime) -> tuple[str, StoredToken]:
    """A new token (shown once to whoever asked for it) and what to store of it."""
    if not grant.user_id or not grant.user_id.strip():
        raise ValueError("a token needs a user: the user must not be empty")
    token_id = secrets.token_hex(_ID_BYTES)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    return f"{PREFIX}{token_id}_{secret}", StoredToken(token_id, secret_digest(secret), grant, now)


def parse_token(token: str) -> tuple[str, str]:
    """The id and secret of a token; `ValueError` for text that is not one (never echoing it)."""
    token = token.strip()
    token_id, separator, secret = token.removeprefix(PREFIX).partition("_")
    if (
        not token.startswith(PREFIX)
        or not separator
        or len(token_id) != _ID_LENGTH
        or any(c not in "0123456789abcdef" for c in token_id)
        or not secret
    ):
        raise ValueError("not a sessionledger token (they look like sl_<16 hex digits>_<secret>)")
    return token_id, secret


def secret_digest(secret: str) -> str:
    """The sha256 (hex) a store keeps instead of the secret: a secret of 256 random bits needs no
    slow hash, as a password would."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
