"""The ledger's session id for google-adk's `(app_name, user_id, session_id)` key.

google-adk scopes a session id to its app and user (two users may both own a session `s1`), while
the ledger's ids are unique across the store: the ledger id spells all three, each part
percent-quoted so that no two keys share an id, and stays readable (`my_app/alice/s1`).
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import quote, unquote

from sessionledger.domain.ids import MAX_ID_LENGTH


def ledger_session_id(app_name: str, user_id: str, session_id: str) -> str:
    """`app/user/session`, each part quoted; `ValueError` when it would not fit the ledger's ids."""
    for value, name in ((app_name, "app_name"), (user_id, "user_id"), (session_id, "session_id")):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty string")
    key = _quoted_key(app_name, user_id, session_id)
    if len(key) > MAX_ID_LENGTH:
        raise ValueError(
            f"app_name, user_id and session_id together are too long for the ledger "
            f"({len(key)} > {MAX_ID_LENGTH} characters once quoted)"
        )
    return key


def adk_key(ledger_id: str) -> tuple[str, str, str] | None:
    """`(app_name, user_id, session_id)` of a ledger id that `ledger_session_id` made, else None."""
    parts = ledger_id.split("/")
    if len(parts) != 3 or not all(parts):
        return None
    app_name, user_id, session_id = (unquote(part) for part in parts)
    return (
        (app_name, user_id, session_id) if _quoted_key(app_name, user_id, session_id) == ledger_id else None
    )


def _quoted_key(app_name: str, user_id: str, session_id: str) -> str:
    return f"{_quoted(app_name)}/{_quoted(user_id)}/{_quoted(session_id)}"


@lru_cache(maxsize=4096)
def _quoted(part: str) -> str:
    """A part percent-quoted; cached, as every append of a session quotes the same three parts."""
    return quote(part, safe="")
