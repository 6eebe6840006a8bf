"""RecallTools and AsyncRecallTools on memory, SQLite and PostgreSQL: Spring AI Session's two recall
tools, their JSON, paging and blank rules, and isolation (a tool argument never reaches another
user's session)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sessionledger.domain import AssistantMessage, EventFilter, SessionEvent, UserMessage
from sessionledger.domain.compaction import SlidingWindowStrategy, TurnCountTrigger
from sessionledger.infrastructure.agents.recall import instant_text

from tests.integration import agent_faces

face, service = agent_faces.face, agent_faces.service  # each test on both faces

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def session_with(service, user: str, texts: list[str], start: datetime = T0) -> str:
    session_id = service.create_session(user, session_id=unique("s")).id
    for index, text in enumerate(texts):
        factory = UserMessage if index % 2 == 0 else AssistantMessage
        service.append_event(
            SessionEvent(
                session_id=session_id, message=factory(text), timestamp=start + timedelta(seconds=index)
            )
        )
    return session_id


def test_instant_text_prints_like_javas_instant():
    assert instant_text(T0) == "2025-06-01T12:00:00Z"
    assert instant_text(T0.replace(microsecond=500_000)) == "2025-06-01T12:00:00.500Z"
    assert instant_text(T0.replace(microsecond=123_456)) == "2025-06-01T12:00:00.123456Z"


def test_page_size_must_be_positive(face, service):
    for bad in (0, -1):
        with pytest.raises(ValueError, match="page_size must be positive"):
            face.RecallTools(service, page_size=bad)


def test_conversation_search_finds_keywords_case_insensitively_as_json(face, service):
    user = unique("u")
    session_id = session_with(service, user, ["Tell me about Paris", "Paris is in France", "and Rome?"])
    found = json.loads(face.RecallTools(service).conversation_search(session_id, "paris"))
    assert found == [
        {"timestamp": "2025-06-01T12:00:00Z", "type": "user", "text": "Tell me about Paris"},
        {"timestamp": "2025-06-01T12:00:01Z", "type": "assistant", "text": "Paris is in France"},
    ]


def test_conversation_search_reaches_archived_and_synthetic_events(face, service):
    user = unique("u")
    session_id = session_with(service, user, [f"turn {i} about the zebra" for i in range(10)])
    service.compact(session_id, TurnCountTrigger(1), SlidingWindowStrategy(max_events=2))
    assert len(service.get_messages(session_id)) < 10
    found = json.loads(face.RecallTools(service, page_size=20).conversation_search(session_id, "zebra"))
    assert [item["text"] for item in found] == [f"turn {i} about the zebra" for i in range(10)]


def test_paging_and_blank_text_dropped_after_paging(face, service):
    user = unique("u")
    session_id = session_with(service, user, ["one", "   ", "three", "four", "five"])
    tools = face.RecallTools(service, page_size=2)
    # a blank query pages through every event; the blank one is dropped after paging: page 0 is short
    assert [i["text"] for i in json.loads(tools.conversation_search(session_id, "  "))] == ["one"]
    assert [i["text"] for i in json.loads(tools.conversation_search(session_id, None, page=1))] == [
        "three",
        "four",
    ]
    assert [i["text"] for i in json.loads(tools.conversation_search(session_id, "", page=-3))] == ["one"]
    assert tools.conversation_search(session_id, "", page=9) == "No results found."


def test_no_results_unknown_session_and_another_users_session(face, service):
    owner = unique("u")
    session_id = session_with(service, owner, ["secret plans"])
    tools = face.RecallTools(service)
    assert tools.conversation_search(session_id, "nothing like it") == "No results found."
    assert tools.conversation_search(unique("missing"), "secret") == "No results found."
    assert tools.conversation_search(session_id, "secret", user_id=unique("intruder")) == "No results found."
    assert "secret plans" in tools.conversation_search(session_id, "secret", user_id=owner)


def test_cross_session_search_covers_only_that_users_sessions_sorted_by_time(face, service):
    user, other = unique("u"), unique("u")
    later = session_with(service, user, ["coffee later", "ok"], start=T0 + timedelta(hours=1))
    earlier = session_with(service, user, ["coffee first", "tea too"], start=T0)
    session_with(service, other, ["coffee of someone else"])
    found = json.loads(face.RecallTools(service).cross_session_search(user, "coffee"))
    assert [(i["sessionId"], i["text"]) for i in found] == [
        (earlier, "coffee first"),
        (later, "coffee later"),
    ]
    assert set(found[0]) == {"sessionId", "timestamp", "type", "text"}


def test_cross_session_terms_modes_since_and_paging(face, service):
    user = unique("u")
    session_with(service, user, ["apples and pears", "only apples", "only pears", "plums"])
    tools = face.RecallTools(service, page_size=2)
    texts = lambda out: [i["text"] for i in json.loads(out)]  # noqa: E731
    assert texts(tools.cross_session_search(user, "apples, pears", match_mode="ALL")) == ["apples and pears"]
    assert texts(tools.cross_session_search(user, "apples,pears")) == ["apples and pears", "only apples"]
    assert texts(tools.cross_session_search(user, "apples,pears", page=1)) == ["only pears"]
    assert texts(tools.cross_session_search(user, "", since="2025-06-01T12:00:02Z")) == [
        "only pears",
        "plums",
    ]
    assert texts(tools.cross_session_search(user, " ", since="2025-06-01T14:00:02+02:00")) == [
        "only pears",
        "plums",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": " , ,"}, "contained no usable search terms"),
        ({"query": ",".join(f"t{i}" for i in range(21))}, "at most 20"),
        ({"query": "x", "since": "yesterday"}, "not a valid ISO-8601 instant"),
        ({"query": "x", "since": "2025-06-01T12:00:00"}, "offset or Z"),
        ({"query": "x", "page": 10**30}, r"^page must be at most 2\*\*63 - 1, got 10{30}$"),
        ({"query": "x", "page": 10**18}, r"^page 10{18} of page_size 10 ends beyond 2\*\*63 - 1$"),
    ],
)
def test_cross_session_bad_arguments_are_value_errors(face, service, kwargs, message):
    with pytest.raises(ValueError, match=message):
        face.RecallTools(service).cross_session_search(unique("u"), **kwargs)
    with pytest.raises(ValueError, match="userId must not be empty"):
        face.RecallTools(service).cross_session_search("  ", "x")


def test_definitions_are_openai_function_tools(face, service):
    definitions = face.RecallTools(service).definitions()
    by_name = {d["function"]["name"]: d for d in definitions}
    assert set(by_name) == {"conversation_search", "cross_session_search"}
    assert all(d["type"] == "function" for d in definitions)
    search = by_name["conversation_search"]["function"]["parameters"]
    assert search["required"] == ["innerThought", "query"] and set(search["properties"]) == {
        "innerThought",
        "query",
        "page",
    }
    cross = by_name["cross_session_search"]["function"]["parameters"]
    assert set(cross["properties"]) == {"innerThought", "query", "matchMode", "since", "page"}


def test_handle_runs_a_model_tool_call_for_the_callers_user_only(face, service):
    owner, intruder = unique("u"), unique("u")
    mine = session_with(service, owner, ["my cat is Felix"])
    theirs = session_with(service, intruder, ["their cat is Tom"])
    tools = face.RecallTools(service)
    args = json.dumps({"innerThought": "look", "query": "cat", "sessionId": theirs, "userId": intruder})
    found = json.loads(tools.handle("conversation_search", args, session_id=mine, user_id=owner))
    assert [i["text"] for i in found] == ["my cat is Felix"]
    # the caller's session of another user reads as unknown
    assert tools.handle("conversation_search", args, session_id=theirs, user_id=owner) == "No results found."
    cross = json.loads(tools.handle("cross_session_search", args, session_id=mine, user_id=owner))
    assert [i["text"] for i in cross] == ["my cat is Felix"]


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("conversation_search", '{"query": "x"', "not valid JSON"),
        ("conversation_search", "[1, 2]", "JSON object"),
        ("conversation_search", '{"innerThought": "t"}', "missing required argument 'query'"),
        ("conversation_search", '{"query": 5}', "'query' must be a string"),
        ("conversation_search", '{"query": "x", "page": "two"}', "'page' must be an integer"),
        ("cross_session_search", '{"query": "x", "since": "soon"}', "not a valid ISO-8601 instant"),
        ("cross_session_search", '{"query": ",,"}', "no usable search terms"),
        ("delete_everything", "{}", "unknown tool"),
        ("conversation_search", "[" * 100_000, "nested too deeply"),  # issue 25: was a RecursionError
        ("cross_session_search", '{"query": ' * 100_000, "nested too deeply"),
    ],
)
def test_handle_turns_bad_calls_into_error_strings_and_changes_nothing(
    face, service, name, arguments, fragment
):
    user = unique("u")
    session_id = session_with(service, user, ["hello"])
    before = service.get_events(session_id, EventFilter.all())
    answer = face.RecallTools(service).handle(name, arguments, session_id=session_id, user_id=user)
    assert answer.startswith("Error:") and fragment in answer
    assert service.get_events(session_id, EventFilter.all()) == before


def test_handle_never_raises_for_the_callers_blank_ids(face, service):
    tools = face.RecallTools(service)
    assert tools.handle("conversation_search", '{"query": "x"}', session_id="s", user_id=" ").startswith(
        "Error:"
    )
    assert tools.handle("conversation_search", '{"query": "x"}', session_id="", user_id="u").startswith(
        "Error:"
    )
