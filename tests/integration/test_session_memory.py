"""SessionMemory and AsyncSessionMemory on memory, SQLite and PostgreSQL: Spring's memory advisor
step by step, Sentinel's fact injection, idempotent ids for retried turns, synchronous compaction,
and bad input that leaves everything stored as it was."""

from __future__ import annotations

import uuid

import pytest
from sessionledger.domain import (
    AssistantMessage,
    EventFilter,
    SessionEvent,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.domain.compaction import SlidingWindowStrategy, TurnCountTrigger
from sessionledger.domain.memory import drop_system_prompts, remove_unpaired_tool_calls
from sessionledger.domain.prompting import FACTS_INTRO
from sessionledger.infrastructure.agents import idempotent_event_id

from tests.integration import agent_faces

face, service = agent_faces.face, agent_faces.service  # each test on both faces

SYNTHETIC = {SessionEvent.SYNTHETIC: True, SessionEvent.COMPACTION_SOURCE: "recursive-summarization"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def everything(service, session_id):
    return [(e.id, e.message, e.archived) for e in service.get_events(session_id, EventFilter.all())]


def test_it_is_an_advisor(face, service):
    assert isinstance(face.unwrapped(face.SessionMemory(service)), face.kind("Advisor"))


def test_a_turn_creates_the_session_reads_history_then_stores_request_and_reply(face, service):
    memory = face.SessionMemory(service)
    cid, user = unique("c"), unique("u")
    first = memory.before(cid, [SystemMessage("be brief"), UserMessage("hi")], user_id=user)
    assert first == [SystemMessage("be brief"), UserMessage("hi")]  # the current message is not doubled
    assert service.get_session(cid).user_id == user
    memory.after(cid, [AssistantMessage("hello")], user_id=user)
    second = memory.before(cid, [SystemMessage("be brief"), UserMessage("how are you?")], user_id=user)
    assert second == [
        SystemMessage("be brief"),
        UserMessage("hi"),
        AssistantMessage("hello"),
        UserMessage("how are you?"),
    ]
    assert service.get_messages(cid) == [
        UserMessage("hi"),
        AssistantMessage("hello"),
        UserMessage("how are you?"),
    ]


def test_without_a_user_the_default_user_owns_a_new_session(face, service):
    cid = unique("c")
    face.SessionMemory(service, default_user_id="fallback").before(cid, [UserMessage("x")])
    assert service.get_session(cid).user_id == "fallback"


def test_every_system_message_goes_to_the_front_history_ones_first(face, service):
    cid, user = unique("c"), unique("u")
    service.create_session(user, session_id=cid)
    service.append_message(cid, SystemMessage("stored rule"))
    service.append_message(cid, UserMessage("old"))
    prompt = face.SessionMemory(service).before(
        cid, [UserMessage("new"), SystemMessage("request rule")], user_id=user
    )
    assert [m.text for m in prompt] == ["stored rule", "request rule", "old", "new"]


def test_a_tool_message_is_the_current_message_and_a_prompt_without_one_stores_an_empty_user_message(
    face, service
):
    memory = face.SessionMemory(service)
    cid, user = unique("c"), unique("u")
    results = ToolResponseMessage([ToolResponse("call-1", "f", "42")])
    memory.before(cid, [UserMessage("earlier"), results], user_id=user)
    memory.before(cid, [SystemMessage("only a rule")], user_id=user)
    assert service.get_messages(cid) == [results, UserMessage("")]


def test_history_is_the_active_window_under_the_merged_filter(face, service):
    cid, user = unique("c"), unique("u")
    service.create_session(user, session_id=cid)
    for index in range(6):
        service.append_message(cid, UserMessage(f"u{index}"))
        service.append_message(cid, AssistantMessage(f"a{index}"))
    service.compact(cid, TurnCountTrigger(1), SlidingWindowStrategy(max_events=4))
    memory = face.SessionMemory(service, event_filter=EventFilter.last(3))
    prompt = memory.before(cid, [UserMessage("now")], user_id=user)
    assert [m.text for m in prompt] == ["a4", "u5", "a5", "now"]
    branch_only = memory.before(cid, [UserMessage("again")], user_id=user, event_filter=EventFilter.last(1))
    assert [m.text for m in branch_only] == ["now", "again"]


def test_branch_reads_are_isolated_and_the_advisor_writes_no_branch(face, service):
    cid, user = unique("c"), unique("u")
    service.create_session(user, session_id=cid)
    service.append_message(cid, UserMessage("research this"), branch="orch.researcher")
    orchestrator = face.SessionMemory(service, event_filter=EventFilter.for_branch("orch"))
    assert orchestrator.before(cid, [UserMessage("status?")], user_id=user) == [UserMessage("status?")]
    researcher = face.SessionMemory(service, event_filter=EventFilter.for_branch("orch.researcher"))
    assert [m.text for m in researcher.before(cid, [UserMessage("go")], user_id=user)] == [
        "research this",
        "status?",
        "go",
    ]
    assert [e.branch for e in service.get_events(cid)] == ["orch.researcher", None, None]


def test_another_users_session_is_refused_and_nothing_changes(face, service):
    cid, owner = unique("c"), unique("u")
    memory = face.SessionMemory(service)
    memory.before(cid, [UserMessage("mine")], user_id=owner)
    stored = everything(service, cid)
    with pytest.raises(
        ValueError, match=f"Session '{cid}' does not belong to user 'mallory'. Access denied."
    ):
        memory.before(cid, [UserMessage("let me in")], user_id="mallory")
    with pytest.raises(ValueError, match="does not belong to user 'mallory'"):
        memory.after(cid, [AssistantMessage("sneaky")], user_id="mallory")
    assert everything(service, cid) == stored


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.before("  ", [UserMessage("x")]), "conversation_id must be a non-empty string"),
        (lambda m: m.before(None, [UserMessage("x")]), "conversation_id must be a non-empty string"),
        (lambda m: m.before("c", None), "messages must not be None"),
        (lambda m: m.before("c", [UserMessage("x"), None]), r"messages\[1\] must be a Message"),
        (lambda m: m.before("c", UserMessage("x")), "messages must be a list"),
        (lambda m: m.before("c", [UserMessage("x")], user_id=""), "user_id must be a non-empty string"),
        (lambda m: m.after("c", None), "replies must not be None"),
        (lambda m: m.after("c", ["text"]), r"replies\[0\] must be a Message"),
        (lambda m: m.after(unique("unknown"), [AssistantMessage("x")]), "not found"),
    ],
)
def test_bad_input_is_a_value_error_and_stores_nothing(face, service, call, message):
    service.create_session("someone", session_id=(cid := unique("c")))
    memory = face.SessionMemory(service, default_user_id=(nobody := unique("nobody")))
    with pytest.raises(ValueError, match=message):
        call(memory)
    assert service.list_sessions(nobody) == []
    assert service.get_events(cid) == []


def test_a_deleted_session_is_not_silently_recreated(face, service):
    cid = unique("c")
    memory = face.SessionMemory(service)
    memory.before(cid, [UserMessage("x")], user_id="u")
    service.delete_session(cid)
    with pytest.raises(ValueError, match="cannot be used"):
        memory.before(cid, [UserMessage("y")], user_id="u")


def test_constructor_checks(face, service):
    with pytest.raises(ValueError, match="set both or neither"):
        face.SessionMemory(service, trigger=TurnCountTrigger(1))
    with pytest.raises(ValueError, match="set both or neither"):
        face.SessionMemory(service, strategy=SlidingWindowStrategy())
    with pytest.raises(ValueError, match="history must be"):
        face.SessionMemory(service, history="summary")  # type: ignore[arg-type]  # the wrong value under test
    with pytest.raises(ValueError, match="service"):
        face.SessionMemory(None)  # type: ignore[arg-type]  # the wrong value under test


def test_empty_replies_are_skipped_by_default_and_a_custom_filter_replaces_the_default(face, service):
    cid, user = unique("c"), unique("u")
    memory = face.SessionMemory(service)
    memory.before(cid, [UserMessage("q")], user_id=user)
    call = AssistantMessage(None, [ToolCall("c1", "f", "{}")])
    memory.after(cid, [AssistantMessage("  "), call, AssistantMessage("answer")], user_id=user)
    assert service.get_messages(cid) == [UserMessage("q"), call, AssistantMessage("answer")]
    custom = face.SessionMemory(service, message_filter=drop_system_prompts)
    custom.after(cid, [SystemMessage("no"), AssistantMessage("")], user_id=user)
    assert service.get_messages(cid)[-1] == AssistantMessage("")


def test_idempotent_ids_make_a_retried_turn_store_nothing_twice(face, service):
    cid, user = unique("c"), unique("u")
    memory = face.SessionMemory(service, idempotent_ids=True)
    call = AssistantMessage(None, [ToolCall("call-7", "f", "{}")])
    results = ToolResponseMessage([ToolResponse("call-7", "f", "ok")])
    for _ in range(2):  # the same turn, retried
        memory.before(cid, [UserMessage("hi")], user_id=user)
        memory.after(cid, [call, results, AssistantMessage("done")], user_id=user)
    assert service.get_messages(cid) == [UserMessage("hi"), call, results, AssistantMessage("done")]
    ids = [e.id for e in service.get_events(cid)]
    fingerprint = f"chat_memory_conversation_id:{cid}"
    assert ids[1] == f"{fingerprint}:toolcall:call-7" and ids[2] == f"{fingerprint}:toolresp:call-7"
    assert ids[0].startswith(f"{fingerprint}:USER:") and len(ids[0]) == len(fingerprint) + 6 + 64


def test_an_idempotent_id_too_long_for_the_ledger_is_hashed():
    many = AssistantMessage(None, [ToolCall(f"call_{i:030d}", "f", "{}") for i in range(10)])
    event_id = idempotent_event_id("c", many)
    assert event_id.startswith("sha256:") and event_id == idempotent_event_id("c", many)


def test_facts_history_puts_the_latest_summary_in_the_system_prompt(face, service):
    cid, user = unique("c"), unique("u")
    service.create_session(user, session_id=cid)
    service.append_message(cid, UserMessage("Summarize the conversation we had so far."), metadata=SYNTHETIC)
    service.append_message(cid, AssistantMessage("The user likes green tea."), metadata=SYNTHETIC)
    service.append_message(cid, UserMessage("and coffee?"))
    memory = face.SessionMemory(service, history="facts")
    prompt = memory.before(
        cid, [SystemMessage("You are helpful."), UserMessage("what do I like?")], user_id=user
    )
    assert [m.type.value for m in prompt] == ["system", "user", "user"]
    assert prompt[0].text.startswith("You are helpful.") and FACTS_INTRO in prompt[0].text
    assert "The user likes green tea." in prompt[0].text
    assert [m.text for m in prompt[1:]] == ["and coffee?", "what do I like?"]
    without_system = memory.before(cid, [UserMessage("again")], user_id=user)
    assert without_system[0].type.value == "system" and "green tea" in without_system[0].text


def test_compaction_runs_in_after_when_trigger_and_strategy_are_given(face, service):
    cid, user = unique("c"), unique("u")
    memory = face.SessionMemory(
        service, trigger=TurnCountTrigger(2), strategy=SlidingWindowStrategy(max_events=2)
    )
    for turn in range(4):
        memory.before(cid, [UserMessage(f"q{turn}")], user_id=user)
        memory.after(cid, [AssistantMessage(f"a{turn}")], user_id=user)
    # the third turn passed the trigger and the window kept its last two events; the fourth followed
    assert [m.text for m in service.get_messages(cid)] == ["q2", "a2", "q3", "a3"]
    assert len(service.get_events(cid)) == 8  # nothing lost: the rest is archived


def test_a_history_selector_pairs_the_tool_results_a_request_brings(face, service):
    """The model asked for a tool; the next request brings its result. The call it answers is not
    unpaired, and stays before it: a tool result without its call is refused by the model's API."""
    cid, user = unique("c"), unique("u")
    memory = face.SessionMemory(service, history_selector=remove_unpaired_tool_calls)
    memory.before(cid, [UserMessage("weather?")], user_id=user)
    asked = AssistantMessage("checking", [ToolCall("c1", "weather", "{}")])
    memory.after(cid, [asked], user_id=user)
    answer = ToolResponseMessage([ToolResponse("c1", "weather", "sunny")])
    assert memory.before(cid, [answer], user_id=user) == [UserMessage("weather?"), asked, answer]


def test_without_trigger_and_strategy_nothing_is_compacted(face, service):
    cid, user = unique("c"), unique("u")
    memory = face.SessionMemory(service)
    for turn in range(4):
        memory.before(cid, [UserMessage(f"q{turn}")], user_id=user)
        memory.after(cid, [AssistantMessage(f"a{turn}")], user_id=user)
    assert len(service.get_messages(cid)) == 8


def test_a_branch_memory_writes_on_its_branch_and_selects_its_history(face, service):
    cid, user = unique("c"), unique("u")
    orchestrator = face.SessionMemory(service, branch="orch")
    orchestrator.before(cid, [UserMessage("brief on tea")], user_id=user)
    orchestrator.after(cid, [AssistantMessage(None, [ToolCall("r1", "research", "{}")])], user_id=user)
    researcher = face.SessionMemory(
        service, branch="orch.researcher", history_selector=remove_unpaired_tool_calls
    )
    prompt = researcher.before(cid, [UserMessage("Research: tea")], user_id=user)
    assert prompt == [UserMessage("brief on tea"), UserMessage("Research: tea")]  # the pending call left out
    researcher.after(cid, [AssistantMessage("tea facts")], user_id=user)
    assert [(e.branch, e.message.text) for e in service.get_events(cid)][-2:] == [
        ("orch.researcher", "Research: tea"),
        ("orch.researcher", "tea facts"),
    ]
    seen = orchestrator.before(cid, [UserMessage("next")], user_id=user)
    assert "tea facts" not in [m.text for m in seen] and "Research: tea" not in [m.text for m in seen]
