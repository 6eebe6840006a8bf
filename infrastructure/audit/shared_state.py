"""`verify` of the app and user state: each scope must hold what the ledger's shared writes make it.

The `app:` and `user:` keys of a created record's initial state and of an event's state delta are
merged into scopes shared between sessions, last write winning; every write path (imports
included, `domain.restore`) merges them in the order of the rows' global positions. So each key's
stored value must be the value of its last write by global position. Only what the ledger can
still derive is checked: a session's deletion erases what its records wrote, so a key whose last
readable write comes before an erased record is not judged, and neither is a key no readable
record wrote once any record was erased (the erased one may have written it).

A finding is reported on the session whose record wrote the key last (at that position), or for a
key no record wrote, on the last session of the scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessionledger.domain.hashing import canonical
from sessionledger.domain.ports import Ledger
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.restore import shared_writes

Scope = tuple[str, ...]
"""`(app_name,)` for an app scope, `(app_name, user_id)` for a user scope."""


@dataclass(frozen=True, slots=True)
class _Write:
    global_position: int
    session_id: str
    position: int
    value: Any


@dataclass(slots=True)
class SharedStateFold:
    """The last write of each shared key over the sessions `add`ed so far (in any order)."""

    last: dict[tuple[Scope, str], _Write] = field(default_factory=dict)
    sessions: dict[Scope, str] = field(default_factory=dict)
    erased_up_to: int = 0
    """The highest global position of an erased record that could have written shared state."""

    def add(self, records: Sequence[LedgerRecord], app_user: tuple[str, str] | None = None) -> None:
        """One session's records (by position), or a range of them with the session's app and
        user (`verify --jobs`: the created record that names them is in another range)."""
        writers = []  # the records that may write shared state: not the events with no state delta
        for record in records:
            payload = record.payload
            if payload is None:
                if record.kind in (Kind.CREATED, Kind.EVENT):
                    self.erased_up_to = max(self.erased_up_to, record.global_position or 0)
                continue
            if record.kind is Kind.CREATED:
                app_user = (str(payload.get("app_name")), str(payload.get("user_id")))
                for scope in ((app_user[0],), app_user):
                    self.sessions[scope] = record.session_id
                writers.append(record)
            elif record.kind is Kind.EVENT and (not isinstance(payload, dict) or payload.get("state_delta")):
                writers.append(record)
        if app_user is None:
            return
        try:
            writes = list(shared_writes(writers))
        except (TypeError, ValueError, AttributeError):  # a payload that is not the ledger's: the
            return  # chain check names it
        for record, delta in writes:
            for scope, values in (((app_user[0],), delta.app), (app_user, delta.user)):
                for key, value in values.items():
                    write = _Write(record.global_position or 0, record.session_id, record.position, value)
                    known = self.last.get((scope, key))
                    if known is None or known.global_position < write.global_position:
                        self.last[(scope, key)] = write

    def merge(self, other: SharedStateFold) -> None:
        """Add what another fold saw (of other sessions, or other ranges of a session)."""
        for key, write in other.last.items():
            known = self.last.get(key)
            if known is None or known.global_position < write.global_position:
                self.last[key] = write
        self.sessions.update(other.sessions)
        self.erased_up_to = max(self.erased_up_to, other.erased_up_to)

    def findings(self, ledger: Ledger) -> dict[str, list[tuple[int | None, str]]]:
        """By session id, `(position, detail)` where a stored scope differs from the fold, on the
        keys it can judge (`verify` makes `Mismatch.STATE` findings of them)."""
        found: dict[str, list[tuple[int | None, str]]] = {}
        for scope, owner in self.sessions.items():
            stored = ledger.app_state(scope[0]) if len(scope) == 1 else ledger.user_state(scope[0], scope[1])
            written = {key for s, key in self.last if s == scope}
            for key in sorted(stored.keys() | written):
                problem = self._problem(scope, key, stored)
                if problem is not None:
                    session_id, position, detail = problem
                    found.setdefault(session_id or owner, []).append((position, detail))
        return found

    def _problem(
        self, scope: Scope, key: str, stored: Mapping[str, Any]
    ) -> tuple[str | None, int | None, str] | None:
        name = f"app {scope[0]!r}" if len(scope) == 1 else f"user {scope[1]!r} of app {scope[0]!r}"
        write = self.last.get((scope, key))
        if write is None:
            if self.erased_up_to:
                return None
            return None, None, f"the stored state of {name} holds key {key!r}, which no ledger record wrote"
        if write.global_position < self.erased_up_to:
            return None
        if key in stored and canonical(stored[key]) == canonical(write.value):
            return None
        held = "does not hold it" if key not in stored else f"holds {canonical(stored[key])[:80]}"
        return (
            write.session_id,
            write.position,
            f"the stored state of {name} {held} for key {key!r}, but record {write.position} "
            f"wrote it last: {canonical(write.value)[:80]}",
        )
