"""What an append did with each event, and the counters a ledger write adds its outcomes to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class AppendOutcome(StrEnum):
    """What happened to one event handed to `Ledger.append` (or `SessionService.ingest`)."""

    STORED = "stored"
    DUPLICATE = "duplicate"  # an event with that id is already in the session's ledger
    NO_SESSION = "no_session"  # the session does not exist or was deleted
    REFUSED = "refused"  # ingest on behalf of an identity: the session is another user's or app's
    CONFLICT = "conflict"  # a conditional append: the session is not at the version it expected


@dataclass(frozen=True, slots=True)
class Tally:
    """The counters (`CounterStore` names) a ledger write adds to, in the write's own transaction.

    An operator's figures then move exactly when what they count commits: a worker killed just
    after a commit has counted it, one killed just before has neither written nor counted it.
    """

    stored: str | None = None
    """+1 per event an append stored."""
    duplicate: str | None = None
    """+1 per event an append found already stored (same session and event id)."""
    compaction: str | None = None
    """+1 per compaction written."""

    def of_append(self, outcomes: Iterable[AppendOutcome]) -> dict[str, int]:
        """What an append with these outcomes adds to each named counter (only the non-zero ones)."""
        names = {AppendOutcome.STORED: self.stored, AppendOutcome.DUPLICATE: self.duplicate}
        deltas: dict[str, int] = {}
        for outcome in outcomes:
            name = names.get(outcome)
            if name:
                deltas[name] = deltas.get(name, 0) + 1
        return deltas

    def of_compaction(self) -> dict[str, int]:
        """What a written compaction adds."""
        return {self.compaction: 1} if self.compaction else {}
