"""The audit's pure rules without a database: the rewind plan and the chain-break classifier."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sessionledger.domain import AssistantMessage, Session, SessionEvent, UserMessage
from sessionledger.domain.hashing import GENESIS_HASH, canonical, sha256_hex
from sessionledger.domain.records import Draft, LedgerRecord, created_draft, event_draft
from sessionledger.domain.rewind import plan_rewind, state_change
from sessionledger.infrastructure.audit.chain import ChainHead, first_break

SESSION = "s-1"


def chain(drafts: list[Draft]) -> list[LedgerRecord]:
    """Place drafts one after the other, as a ledger would (version +1 per event)."""
    records: list[LedgerRecord] = []
    prev = GENESIS_HASH
    for position, draft in enumerate(drafts, start=1):
        record = draft.place(SESSION, position, position - 1, prev)
        records.append(record)
        prev = record.row_hash
    return records


def session_records(invocations: list[str], state: dict | None = None) -> list[LedgerRecord]:
    session = Session(id=SESSION, user_id="u", created_at=datetime(2026, 1, 1, tzinfo=UTC))
    drafts = [created_draft(session, state or {})]
    for turn, invocation in enumerate(invocations):
        drafts.append(
            event_draft(
                SessionEvent(
                    session_id=SESSION,
                    message=UserMessage(f"q{turn}") if turn % 2 == 0 else AssistantMessage(f"a{turn}"),
                    invocation_id=invocation,
                    state_delta={"turn": turn, f"seen{turn}": True, "app:shared": turn},
                )
            )
        )
    return chain(drafts)


def digests(records: list[LedgerRecord]) -> list[str | None]:
    return [None if r.payload is None else sha256_hex(canonical(r.payload)) for r in records]


def test_state_change_sets_what_differs_and_nulls_what_the_target_lacks() -> None:
    current = {"same": 1, "changed": 1, "flag": 1, "gone": "x", "already_none": None}
    target = {"same": 1, "changed": 2, "flag": True, "new": [1]}
    assert state_change(current, target) == {"changed": 2, "flag": True, "new": [1], "gone": None}


def test_a_rewind_hides_the_invocation_and_what_followed_and_restores_initial_state() -> None:
    records = session_records(["i1", "i1", "i2", "i2", "i3"], state={"mood": "calm", "app:x": 1})
    draft = plan_rewind(records, "i2", datetime.now(UTC))
    assert draft.payload["hidden"] == [4, 5, 6]
    assert draft.payload["window"] == [2, 3]
    # turn 1 set turn=1 and seen1; the hidden turns' keys become None, app: keys are not touched
    assert draft.payload["state_delta"] == {"turn": 1, "seen2": None, "seen3": None, "seen4": None}
    assert draft.payload["before_invocation_id"] == "i2"


def test_a_rewind_to_an_invocation_outside_the_window_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match="not in the active window"):
        plan_rewind(session_records(["i1", "i2"]), "i9", datetime.now(UTC))


def test_an_intact_chain_has_no_break() -> None:
    records = session_records(["i1"] * 6)
    assert first_break(records, digests(records), ChainHead(7, records[-1].row_hash)) is None


def test_each_kind_of_break_is_named_at_its_first_position() -> None:
    records = session_records(["i1"] * 8)
    head = ChainHead(len(records), records[-1].row_hash)

    def found(changed: list[LedgerRecord]) -> tuple[str, int]:
        result = first_break(changed, digests(changed), head)
        assert result is not None
        return str(result.kind), result.position

    edited = list(records)
    edited[3] = replace(records[3], payload={**(records[3].payload or {}), "branch": "x"})
    assert found(edited) == ("edited", 4)

    renumbered = [
        replace(r, position=r.position - 1) if r.position > 5 else r for r in records if r.position != 5
    ]
    assert found(renumbered) == ("deleted", 5)

    swapped = [*records[:3], replace(records[4], position=4), replace(records[3], position=5), *records[5:]]
    assert found(swapped) == ("reordered", 4)

    intruder = event_draft(SessionEvent(session_id=SESSION, message=UserMessage("never said")))
    forged = intruder.place(SESSION, 4, 3, records[2].row_hash)
    inserted = [*records[:3], forged, *(replace(r, position=r.position + 1) for r in records[3:])]
    assert found(inserted) == ("inserted", 4)

    assert found(records[:-1]) == ("deleted", len(records))
    erased = list(records)
    erased[2] = replace(records[2], payload=None)
    assert found(erased) == ("edited", 3)
