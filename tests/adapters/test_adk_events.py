"""google-adk events as ledger events and back: what the workers read (a Message) and what ADK
reads back (its own event exactly, an event appended through the ledger's API, a summary)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types
from sessionledger.domain import (
    AssistantMessage,
    MessageType,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.infrastructure.adk.events import ADK_KEY, adk_json, message_of, thaw, to_adk, to_ledger


def content(role: str, *parts: types.Part) -> types.Content:
    return types.Content(role=role, parts=list(parts))


def test_what_an_adk_event_says_becomes_a_message():
    said = Event(author="user", content=content("user", types.Part(text="hi"), types.Part(text="there")))
    assert message_of(said) == UserMessage("hi\nthere")
    call = types.FunctionCall(id="c1", name="add", args={"a": 1})
    thought = types.Part(text="hmm", thought=True)
    asked = Event(
        author="calc",
        content=content("model", thought, types.Part(text="adding"), types.Part(function_call=call)),
    )
    assert message_of(asked) == AssistantMessage(
        "adding", [ToolCall(id="c1", name="add", arguments='{"a": 1}')]
    )
    answer = types.FunctionResponse(id="c1", name="add", response={"result": 2})
    responded = Event(author="calc", content=content("user", types.Part(function_response=answer)))
    assert message_of(responded) == ToolResponseMessage(
        [ToolResponse(id="c1", name="add", content='{"result": 2}')]
    )
    assert message_of(Event(author="user")) == AssistantMessage(None)  # no content: a state change


def test_an_adk_event_comes_back_equal_and_the_ledger_event_carries_its_fields():
    event = Event(
        invocation_id="inv",
        author="user",
        branch="root.sub",
        timestamp=1700000000.123456789,
        content=content("user", types.Part.from_bytes(data=b"\x00\x01", mime_type="image/png")),
        actions=EventActions(state_delta={"k": 1}),
    )
    stored = to_ledger(event, "app/u/s")
    assert (stored.id, stored.session_id, stored.invocation_id, stored.branch) == (
        event.id,
        "app/u/s",
        "inv",
        "root.sub",
    )
    assert stored.state_delta == {"k": 1} and stored.type is MessageType.USER
    assert to_adk([stored]) == [event]


def test_the_adk_event_is_stored_as_json_text_and_the_older_object_form_still_reads():
    event = Event(author="user", timestamp=1700000000.5, content=content("user", types.Part(text='hé "q"')))
    stored = to_ledger(event, "app/u/s")
    text = stored.metadata[ADK_KEY]
    assert isinstance(text, str)  # one cheap check on append
    older = replace(stored, metadata={ADK_KEY: event.model_dump(mode="json", exclude_none=True)})
    assert to_adk([stored]) == to_adk([older]) == [event]
    assert adk_json(text) == adk_json(older.metadata[ADK_KEY])


def test_an_event_appended_through_the_ledgers_api_reads_as_an_adk_event():
    at = datetime(2026, 1, 1, tzinfo=UTC)
    calls = AssistantMessage("let me add", [ToolCall(id="c1", name="add", arguments='{"a": 1}')])
    events = [
        SessionEvent(session_id="s", message=UserMessage("hi"), timestamp=at, state_delta={"k": [1]}),
        SessionEvent(session_id="s", message=calls, timestamp=at),
        SessionEvent(
            session_id="s", message=ToolResponseMessage([ToolResponse("c1", "add", "2")]), timestamp=at
        ),
    ]
    user, model, tool = to_adk(events)
    assert (user.author, user.content.parts[0].text, user.actions.state_delta) == ("user", "hi", {"k": [1]})
    assert user.timestamp == at.timestamp() and user.id == events[0].id
    assert model.content.role == "model" and model.content.parts[1].function_call.args == {"a": 1}
    assert tool.content.parts[0].function_response.response == {"result": 2}


def test_a_summary_pair_reads_as_one_compaction_event_before_the_kept_events():
    meta = {"synthetic": True, "compactionSource": "recursive-summarization"}
    late = datetime(2026, 1, 2, tzinfo=UTC)
    kept = Event(author="user", timestamp=100.0, content=content("user", types.Part(text="kept")))
    events = [
        SessionEvent(session_id="s", message=UserMessage("Summarize"), metadata=meta, timestamp=late),
        SessionEvent(session_id="s", message=AssistantMessage("the summary"), metadata=meta, timestamp=late),
        to_ledger(kept, "s"),
    ]
    summary, again = to_adk(events)
    assert again == kept
    compaction = summary.actions.compaction
    assert compaction.compacted_content == content("model", types.Part(text="the summary"))
    assert compaction.start_timestamp == compaction.end_timestamp == summary.timestamp < 100.0


def test_thaw_makes_plain_mutable_copies():
    frozen = {"a": ({"b": 1},), "c": "d"}
    plain = thaw(frozen)
    assert plain == {"a": [{"b": 1}], "c": "d"}
    plain["a"][0]["b"] = 2
    assert frozen["a"][0]["b"] == 1
