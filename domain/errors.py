"""The project's own exceptions (everything else is a plain `ValueError`)."""


class SessionNotFound(LookupError):
    """The session does not exist (or was deleted)."""


class ConcurrencyConflict(RuntimeError):
    """A version-checked write kept losing to concurrent writers and gave up."""
