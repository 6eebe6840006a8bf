"""The write plans every ledger follows: a batch append and a compaction write, and the event id rule."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sessionledger.domain import AssistantMessage, SessionEvent, UserMessage
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.compaction import CompactionResult
from sessionledger.domain.hashing import GENESIS_HASH
from sessionledger.domain.records import Draft, Kind, event_draft
from sessionledger.domain.window import Window, WindowHead, WindowStats
from sessionledger.domain.window_stats import stats_after_appends
from sessionledger.domain.write_plans import (
    BatchSession,
    LedgerHead,
    plan_batch,
    plan_compaction,
    version_check,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def user(session_id: str, text: str, **fields) -> SessionEvent:
    return SessionEvent(session_id=session_id, message=UserMessage(text), timestamp=T0, **fields)


def summary(session_id: str, **fields) -> SessionEvent:
    return SessionEvent(
        session_id=session_id,
        message=AssistantMessage("sum"),
        timestamp=T0,
        metadata={"synthetic": True},
        **fields,
    )


def fresh(session_id: str) -> BatchSession:
    return BatchSession(LedgerHead(1, "h" * 64, 0), WindowStats(), {"kept": 1}, "app", "u-" + session_id)


def test_a_batch_places_each_sessions_events_in_order_and_folds_their_state() -> None:
    events = [
        user("a", "a1", state_delta={"n": 1, "app:x": 1}),
        user("b", "b1", state_delta={"user:y": 1}),
        user("missing", "m"),
        user("a", "a2", state_delta={"n": 2, "app:x": 2, "user:y": 3}),
    ]
    sessions = {"a": fresh("a"), "b": fresh("b")}
    plan = plan_batch([event_draft(e) for e in events], sessions, taken=())
    assert plan.outcomes == [
        AppendOutcome.STORED,
        AppendOutcome.STORED,
        AppendOutcome.NO_SESSION,
        AppendOutcome.STORED,
    ]
    assert [(p.record.session_id, p.record.position, p.record.version) for p in plan.appended] == [
        ("a", 2, 1),
        ("b", 2, 1),
        ("a", 3, 2),
    ]
    a = plan.sessions["a"]
    assert a.head == LedgerHead.of(plan.appended[2].record) and a.state == {"kept": 1, "n": 2}
    assert a.stats == stats_after_appends(WindowStats(), [events[0], events[3]])
    assert plan.app_states == {"app": {"x": 2}}
    assert plan.user_states == {("app", "u-b"): {"y": 1}, ("app", "u-a"): {"y": 3}}
    assert sessions["a"].state == {"kept": 1}  # the sessions read are left as they were


def at(event: SessionEvent, version: int) -> Draft:
    """The event's draft as a conditional append at `version`."""
    return replace(event_draft(event), expected_version=version)


def test_a_conditional_append_holds_only_at_its_version_after_the_batchs_earlier_events() -> None:
    """`version_check` is the rule; a conflict is checked before the event id rule and after the
    session's existence, and stores nothing."""
    once = user("a", "once")
    drafts = [
        at(once, 0),
        at(user("a", "late"), 0),  # the batch's first event moved the version to 1
        at(once, 0),  # a stale duplicate: a conflict too
        at(user("missing", "m"), 7),
        at(user("a", "next"), 1),
        event_draft(user("a", "unconditional")),
    ]
    plan = plan_batch(drafts, {"a": fresh("a")}, taken=())
    assert plan.outcomes == [
        AppendOutcome.STORED,
        AppendOutcome.CONFLICT,
        AppendOutcome.CONFLICT,
        AppendOutcome.NO_SESSION,
        AppendOutcome.STORED,
        AppendOutcome.STORED,
    ]
    assert [p.draft for p in plan.appended] == [drafts[0], drafts[4], drafts[5]]
    assert plan.sessions["a"].head.version == 3
    assert version_check(drafts[5], 12) is None and version_check(drafts[4], 1) is None
    assert version_check(drafts[4], 2) is AppendOutcome.CONFLICT


def test_a_batch_takes_an_event_id_with_its_first_use() -> None:
    first, stored = user("a", "1"), user("a", "3")
    again = user("a", "2", id=first.id)
    plan = plan_batch(
        [event_draft(e) for e in (first, again, stored)], {"a": fresh("a")}, taken={("a", stored.id)}
    )
    assert plan.outcomes == [AppendOutcome.STORED, AppendOutcome.DUPLICATE, AppendOutcome.DUPLICATE]
    assert [p.draft.event for p in plan.appended] == [first]


def test_only_event_drafts_are_appended() -> None:
    from sessionledger.domain.records import erasure_draft

    with pytest.raises(ValueError, match="only event drafts"):
        plan_batch([erasure_draft(at=T0, reason="x")], {}, taken=())


def window_of(events: list[SessionEvent], counts: list[int | None]) -> tuple[Window, LedgerHead]:
    """A read window of `events` at positions 2.. (after a `created` record), and its head."""
    records, prev = [], GENESIS_HASH
    for position, event in enumerate(events, start=2):
        records.append(event_draft(event).place("s", position, position - 1, prev))
        prev = records[-1].row_hash
    positions = tuple(r.position for r in records)
    read = Window(
        WindowHead(len(events), 0, positions[-1]), tuple(events), positions, token_counts=tuple(counts)
    )
    return read, LedgerHead.of(records[-1])


def test_a_compaction_places_its_new_events_then_its_record() -> None:
    events = [user("s", f"m{i}") for i in range(4)]
    read, head = window_of(events, [5, 6, 7, 8])
    new = summary("s")
    plan = plan_compaction(
        read, CompactionResult((new, *events[-2:]), tuple(events[:2])), head, at=T0, source="test", taken=()
    )
    assert [(p.record.kind, p.record.position, p.record.version) for p in plan.written] == [
        (Kind.EVENT, 6, 5),
        (Kind.COMPACTION, 7, 5),
    ]
    assert plan.written[0].record.prev_hash == head.hash
    assert plan.written[1].record.prev_hash == plan.written[0].record.row_hash
    assert plan.window == (6, 4, 5) and plan.record.payload["archived"] == [2, 3]
    assert plan.prefix == ((new, None), (events[2], 7), (events[3], 8)) and plan.counted
    assert plan.head == LedgerHead.of(plan.record) and plan.new_event_ids == [new.id]


def test_a_compaction_with_an_uncounted_kept_event_is_not_counted() -> None:
    events = [user("s", f"m{i}") for i in range(3)]
    read, head = window_of(events, [5, None, 7])
    plan = plan_compaction(
        read,
        CompactionResult((summary("s"), events[1]), (events[0], events[2])),
        head,
        at=T0,
        source="t",
        taken=(),
    )
    assert not plan.counted


def test_a_compaction_names_each_event_once_and_takes_no_taken_id() -> None:
    events = [user("s", f"m{i}") for i in range(3)]
    read, head = window_of(events, [None] * 3)
    twice = summary("s")
    results = [
        (CompactionResult((twice, twice), events), "names event id .* twice"),
        (CompactionResult((summary("s"), events[2], events[2]), events[:2]), "names event id .* twice"),
        (CompactionResult((summary("s", id="old"), events[2]), events[:2]), "re-uses event id 'old'"),
    ]
    for result, message in results:
        with pytest.raises(ValueError, match=message):
            plan_compaction(read, result, head, at=T0, source="t", taken={"old"})
