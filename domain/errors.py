"""The project's own exceptions (everything else is a plain `ValueError`)."""

from __future__ import annotations


class SessionNotFound(LookupError):
    """The session does not exist (or was deleted)."""


class ConcurrencyConflict(RuntimeError):
    """A version-checked write kept losing to concurrent writers and gave up."""


class SessionExists(ValueError):
    """A new session's id is in use, or was once: session ids are never reused.

    A `ValueError`, as it always was, so code that catches `ValueError` sees no change; its own
    class lets an adapter that creates a session on first use tell "someone else created it" from
    every other refusal without reading the ledger again to guess.
    """

    @classmethod
    def taken(cls, session_id: str) -> SessionExists:
        """The ledgers' one text for it (every backend's create and restore raise this)."""
        return cls(f"session {session_id!r} already exists (or existed and was deleted)")
