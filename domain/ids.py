"""What an id may hold so that every backend can store, index and look it up: checked where it enters."""

from __future__ import annotations

MAX_ID_LENGTH = 255
"""Characters, for a new id. Two ids of 4-byte characters (a ledger key is a session id and an
event id) then stay within one PostgreSQL btree index entry (2,704 bytes)."""


def check_id(value: str, name: str) -> str:
    """`value`, or a `ValueError` naming `name` when it holds a NUL character: PostgreSQL text
    cannot, so no backend could look it up. Enough for an id that only finds something."""
    if "\x00" in value:
        raise ValueError(f"{name} contains a NUL character (\\x00)")
    return value


def check_new_id(value: str, name: str) -> str:
    """`check_id`, and at most `MAX_ID_LENGTH` characters: for an id the ledger will store.

    Looking up an existing id takes any length, so what was stored before the limit stays reachable.
    """
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{name} is {len(value)} characters long; ids are at most {MAX_ID_LENGTH}")
    return check_id(value, name)
