"""domain.memory: Sentinel's pre-filters and selectors over events, rule for rule."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st
from sessionledger.domain import (
    AssistantMessage,
    SessionEvent,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.domain.memory import (
    compose,
    drop_failed_tool_calls,
    drop_system_prompts,
    full_runs_only,
    remove_all_tool_calls,
    remove_unpaired_tool_calls,
)

SID = "s"


def ev(message, id: str, **fields) -> SessionEvent:
    return SessionEvent(session_id=SID, message=message, id=id, **fields)


def call(
    call_id: str, text: str | None = None, id: str | None = None, run: str | None = None
) -> SessionEvent:
    return ev(
        AssistantMessage(text, [ToolCall(call_id, "f", "{}")]), id or f"call-{call_id}", invocation_id=run
    )


def result(
    call_id: str, *, error: bool = False, id: str | None = None, run: str | None = None
) -> SessionEvent:
    return ev(
        ToolResponseMessage([ToolResponse(call_id, "f", "out")]),
        id or f"result-{call_id}",
        metadata={"error": True} if error else None,
        invocation_id=run,
    )


def ids(events: list[SessionEvent]) -> list[str]:
    return [e.id for e in events]


def test_drop_system_prompts_keeps_everything_else_in_order():
    events = [ev(SystemMessage("be nice"), "s1"), ev(UserMessage("hi"), "u1"), ev(SystemMessage("x"), "s2")]
    assert ids(drop_system_prompts(events)) == ["u1"]


def test_drop_failed_tool_calls_drops_the_failed_result_and_its_call():
    events = [ev(UserMessage("q"), "u"), call("a"), result("a", error=True), call("b"), result("b")]
    assert ids(drop_failed_tool_calls(events)) == ["u", "call-b", "result-b"]


def test_drop_failed_tool_calls_keeps_calls_of_unknown_outcome_and_text():
    events = [call("a", text="let me look"), result("a", error=True), call("c")]
    kept = drop_failed_tool_calls(events)
    assert ids(kept) == ["call-a", "call-c"]
    assert kept[0].message.text == "let me look" and kept[0].message.tool_calls == ()


def test_drop_failed_tool_calls_trims_one_call_of_several():
    both = ev(AssistantMessage(None, [ToolCall("a", "f", "{}"), ToolCall("b", "g", "{}")]), "both")
    kept = drop_failed_tool_calls([both, result("a", error=True), result("b")])
    assert ids(kept) == ["both", "result-b"]
    assert [c.id for c in kept[0].message.tool_calls] == ["b"]


def test_error_false_is_not_a_failure():
    events = [
        call("a"),
        ev(ToolResponseMessage([ToolResponse("a", "f", "ok")]), "r", metadata={"error": False}),
    ]
    assert ids(drop_failed_tool_calls(events)) == ["call-a", "r"]


def test_unpaired_remover_drops_only_the_first_event_of_an_unpaired_id():
    # two calls with one id and no result: the first goes, the second survives (Sentinel's tested quirk)
    events = [ev(UserMessage("q"), "u"), call("a", id="first"), call("a", id="second")]
    assert ids(remove_unpaired_tool_calls(events)) == ["u", "second"]


def test_unpaired_remover_keeps_pairs_even_apart_and_drops_orphan_results():
    events = [call("a"), ev(UserMessage("x"), "u"), result("a"), result("z")]
    assert ids(remove_unpaired_tool_calls(events)) == ["call-a", "u", "result-a"]


def test_unpaired_remover_takes_the_unpaired_call_out_of_an_event_and_keeps_its_pair():
    """Sentinel keeps each call in a message of its own: dropping the whole event would leave the
    result of its paired call without it, a history the model's API refuses."""
    both = ev(AssistantMessage("let me check", [ToolCall("a", "f", "{}"), ToolCall("b", "g", "{}")]), "both")
    kept = remove_unpaired_tool_calls([ev(UserMessage("hi"), "u"), both, result("a")])
    assert ids(kept) == ["u", "both", "result-a"]
    assert kept[1].message.text == "let me check" and [c.id for c in kept[1].message.tool_calls] == ["a"]


def test_unpaired_remover_takes_an_orphan_result_out_of_an_event_and_keeps_its_pair():
    results = ev(ToolResponseMessage([ToolResponse("a", "f", "ok"), ToolResponse("z", "f", "?")]), "results")
    kept = remove_unpaired_tool_calls([call("a"), results])
    assert ids(kept) == ["call-a", "results"]
    assert [r.id for r in kept[1].message.tool_responses] == ["a"]


def test_full_runs_only_keeps_runs_with_a_user_message_and_a_final_reply():
    events = [
        ev(UserMessage("q1"), "u1", invocation_id="r1"),
        call("a", run="r1"),
        result("a", run="r1"),
        ev(AssistantMessage("done"), "a1", invocation_id="r1"),
        ev(UserMessage("q2"), "u2", invocation_id="r2"),
        call("b", run="r2"),
        ev(AssistantMessage("orphan"), "a3", invocation_id="r3"),
    ]
    assert ids(full_runs_only(events)) == ["u1", "call-a", "result-a", "a1"]


def test_full_runs_only_treats_missing_run_ids_as_one_run():
    events = [ev(UserMessage("q"), "u"), ev(AssistantMessage("a"), "a")]
    assert ids(full_runs_only(events)) == ["u", "a"]


def test_remove_all_tool_calls_keeps_text():
    events = [
        ev(UserMessage("q"), "u"),
        call("a", text="thinking"),
        result("a"),
        call("b"),
        ev(AssistantMessage("x"), "x"),
    ]
    kept = remove_all_tool_calls(events)
    assert ids(kept) == ["u", "call-a", "x"]
    assert kept[1].message.tool_calls == () and kept[1].message.text == "thinking"


def test_compose_applies_left_to_right():
    events = [ev(SystemMessage("s"), "s"), call("a"), result("a", error=True), ev(UserMessage("q"), "u")]
    both = compose(drop_system_prompts, drop_failed_tool_calls)
    assert ids(both(events)) == ["u"]


# --- properties ---------------------------------------------------------------------------------

ALL = [
    drop_system_prompts,
    drop_failed_tool_calls,
    remove_unpaired_tool_calls,
    full_runs_only,
    remove_all_tool_calls,
]


@st.composite
def event_lists(draw) -> list[SessionEvent]:
    size = draw(st.integers(0, 12))
    events: list[SessionEvent] = []
    for index in range(size):
        kind = draw(st.sampled_from(["user", "system", "reply", "call", "result"]))
        run = draw(st.sampled_from([None, "r1", "r2"]))
        call_id = draw(st.sampled_from(["a", "b", "c"]))
        if kind == "user":
            events.append(ev(UserMessage("u"), f"e{index}", invocation_id=run))
        elif kind == "system":
            events.append(ev(SystemMessage("s"), f"e{index}", invocation_id=run))
        elif kind == "reply":
            events.append(
                ev(AssistantMessage(draw(st.sampled_from([None, "t"]))), f"e{index}", invocation_id=run)
            )
        elif kind == "call":
            events.append(call(call_id, draw(st.sampled_from([None, "t"])), id=f"e{index}", run=run))
        else:
            events.append(result(call_id, error=draw(st.booleans()), id=f"e{index}", run=run))
    return events


@settings(max_examples=150, deadline=None)
@given(event_lists())
def test_every_selector_leaves_its_input_alone_and_keeps_order(events):
    before = copy.copy(events)
    for selector in ALL:
        out = selector(events)
        assert events == before and [e.message for e in events] == [e.message for e in before]
        positions = [ids(events).index(e.id) for e in out]
        assert positions == sorted(positions), selector.__name__
        assert len(set(positions)) == len(positions)


@settings(max_examples=150, deadline=None)
@given(event_lists())
def test_selectors_are_idempotent_and_remove_what_they_name(events):
    for selector in (drop_system_prompts, drop_failed_tool_calls, full_runs_only, remove_all_tool_calls):
        once = selector(events)
        assert ids(selector(once)) == ids(once), selector.__name__
    assert all(e.type.value != "system" for e in drop_system_prompts(events))
    assert all(not e.message.tool_calls and e.type.value != "tool" for e in remove_all_tool_calls(events))
    assert not any(e.metadata.get("error") for e in drop_failed_tool_calls(events))


@settings(max_examples=150, deadline=None)
@given(event_lists())
def test_unpaired_remover_never_removes_an_event_whose_ids_are_all_paired(events):
    out = set(ids(remove_unpaired_tool_calls(events)))
    calls = {c.id for e in events for c in e.message.tool_calls}
    results = {r.id for e in events for r in e.message.tool_responses}
    for event in events:
        mentioned = {c.id for c in event.message.tool_calls} | {r.id for r in event.message.tool_responses}
        if all(i in calls and i in results for i in mentioned):
            assert event.id in out
