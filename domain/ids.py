"""What an id may hold so that every backend can store and index it: checked where an id enters."""

from __future__ import annotations

MAX_ID_LENGTH = 255
"""Characters. Two ids of 4-byte characters (a ledger key is a session id and an event id) stay
within one PostgreSQL btree index entry (2,704 bytes); PostgreSQL text cannot hold NUL at all."""


def check_id(value: str, name: str) -> str:
    """`value`, or a `ValueError` naming `name` when it is too long or holds a NUL character."""
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{name} is {len(value)} characters long; ids are at most {MAX_ID_LENGTH}")
    if "\x00" in value:
        raise ValueError(f"{name} contains a NUL character (\\x00)")
    return value
