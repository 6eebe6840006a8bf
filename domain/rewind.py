"""google-adk's rewind as a ledger rule (docs/api.md "Rewind"), shared by every backend.

Rewinding before an invocation hides the active window's events from the first event of that
invocation on. The rewind is itself a ledger record; the hidden events stay in the ledger for
audit but no read API returns them again. Session-scoped state goes back to what the initial
state (kept in the `created` record, unlike ADK) and the remaining events make it: a key those
do not define becomes `None`, as in ADK. `app:` and `user:` state are never rewound.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sessionledger.domain.hashing import canonical
from sessionledger.domain.records import Draft, Kind, LedgerRecord, rewind_draft
from sessionledger.domain.replay import replay
from sessionledger.domain.sessions import split_state_delta


def plan_rewind(records: Sequence[LedgerRecord], before_invocation_id: str, at: datetime) -> Draft:
    """The rewind record for a live session whose records (by position) are `records`.

    `LookupError` when no event of the active window belongs to that invocation (an unknown id,
    one already rewound, or one whose events were all compacted into a summary).
    """
    projection = replay(records)
    positions = projection.window_positions
    start = next(
        (i for i, event in enumerate(projection.window) if event.invocation_id == before_invocation_id),
        None,
    )
    if projection.deleted or start is None:
        raise LookupError(
            f"invocation id {before_invocation_id!r} is not in the active window of session "
            f"{records[0].session_id if records else '?'}"
        )
    hidden = positions[start:]
    target = session_state_without(records, {*projection.hidden, *hidden})
    return rewind_draft(
        at=at,
        before_invocation_id=before_invocation_id,
        hidden=hidden,
        window=positions[:start],
        state_delta=state_change(projection.session_state, target),
    )


def session_state_without(records: Iterable[LedgerRecord], hidden: Collection[int]) -> dict[str, Any]:
    """Session-scoped state as if the `hidden` events never happened: initial state, then deltas."""
    state: dict[str, Any] = {}
    for record in records:
        if record.payload is None:
            continue
        if record.kind is Kind.CREATED:
            state.update(split_state_delta(record.payload["state"]).session)
        elif record.kind is Kind.EVENT and record.position not in hidden:
            state.update(split_state_delta(record.payload["state_delta"]).session)
    return state


def state_change(current: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """The delta that turns `current` into `target`; keys `target` lacks become `None` (ADK)."""
    delta = {
        key: value
        for key, value in target.items()
        if key not in current or canonical(current[key]) != canonical(value)
    }
    delta.update((key, None) for key in current if key not in target and current[key] is not None)
    return delta
