"""Messages: immutability, value equality, factories and the OpenAI format both ways."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from sessionledger.domain import (
    AssistantMessage,
    Message,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    from_openai,
    to_openai,
)


def test_message_type_values_are_lowercase_strings():
    assert [t.value for t in MessageType] == ["user", "assistant", "system", "tool"]
    assert MessageType.USER == "user"
    assert MessageType("assistant") is MessageType.ASSISTANT


def test_factories_build_messages_of_their_type():
    assert UserMessage("hi") == Message(MessageType.USER, "hi")
    assert SystemMessage("be brief").type is MessageType.SYSTEM
    empty = AssistantMessage()
    assert (empty.type, empty.text, empty.tool_calls) == (MessageType.ASSISTANT, None, ())
    tool = ToolResponseMessage(iter([ToolResponse("c1", "f", "ok")]))
    assert tool.type is MessageType.TOOL
    assert tool.text == ""
    assert tool.tool_responses == (ToolResponse("c1", "f", "ok"),)


def test_any_iterable_becomes_a_tuple():
    calls = [ToolCall("c1", "f", "{}"), ToolCall("c2", "g", '{"x":1}')]
    message = AssistantMessage(None, (c for c in calls))
    assert message.tool_calls == tuple(calls)


def test_messages_are_immutable_with_value_equality():
    message = UserMessage("hi", metadata={"k": [1]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.text = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        message.metadata["k"] = 2  # type: ignore[index]
    assert message == UserMessage("hi", metadata={"k": [1]})
    assert message != UserMessage("hi")
    assert hash(message) == hash(UserMessage("hi", metadata={"k": [1]}))
    assert pickle.loads(pickle.dumps(message)) == message


def test_metadata_is_copied_from_the_callers_dict():
    source = {"k": "v"}
    message = UserMessage("hi", metadata=source)
    source["k"] = "changed"
    assert message.metadata == {"k": "v"}


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (lambda: Message("robot", "x"), "unknown message type"),
        (lambda: Message(MessageType.USER, 42), "text must be a string"),
        (lambda: Message(MessageType.USER, "x", (ToolCall("c", "f", "{}"),)), "only an assistant"),
        (lambda: Message(MessageType.USER, "x", tool_responses=(ToolResponse("c", "f", ""),)), "only a tool"),
        (lambda: AssistantMessage(None, ["not a call"]), "ToolCall"),
        (lambda: ToolCall("c", "f", {"x": 1}), "arguments must be a string"),
        (lambda: ToolResponse("c", None, "x"), "name must be a string"),
    ],
)
def test_invalid_messages_raise_value_error(build, problem):
    with pytest.raises(ValueError, match=problem):
        build()


def test_a_checked_message_is_the_message_the_constructor_makes():
    call = ToolCall("c", "f", "{}")
    for fields in [
        ("assistant", None, [call], [], {"k": [1]}),
        (MessageType.TOOL, "", (), (ToolResponse("c", "f", "ok"),), None),
        ("user", "hi", (), (), {}),
    ]:
        made, built = Message._checked(*fields), Message(*fields)
        assert type(made) is Message and made == built
        for name in ("type", "tool_calls", "tool_responses"):
            assert getattr(made, name) == getattr(built, name)
        assert type(made.type) is MessageType and type(made.tool_calls) is tuple
        with pytest.raises(TypeError):
            made.metadata["k"] = 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (("robot", "x", (), (), None), "^unknown message type 'robot'$"),
        (("user", 42, (), (), None), "^text must be a string or None, got int$"),
        (("user", "a\x00", (), (), None), "^text contains a NUL character"),
        (("user", "x", [ToolCall("c", "f", "{}")], (), None), "^only an assistant message can"),
        (("user", "x", (), [ToolResponse("c", "f", "")], None), "^only a tool message can"),
        (("assistant", None, ["not a call"], (), None), "^tool_calls must contain ToolCall values$"),
        (("tool", None, (), [{"id": "c"}], None), "^tool_responses must contain ToolResponse values$"),
        (("user", "x", (), (), [("k", "v")]), "^metadata: expected a mapping, got list$"),
    ],
)
def test_a_checked_message_is_refused_as_the_constructor_refuses_it(fields, problem):
    with pytest.raises(ValueError, match=problem):
        Message._checked(*fields)
    with pytest.raises(ValueError, match=problem):
        Message(*fields)


# --- OpenAI ----------------------------------------------------------------------------------------


def test_to_openai_text_messages():
    assert to_openai([SystemMessage("sys"), UserMessage("hi"), AssistantMessage("hello")]) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


def test_to_openai_tool_calls_and_one_dict_per_tool_response():
    messages = [
        AssistantMessage(None, [ToolCall("c1", "weather", '{"city":"Paris"}'), ToolCall("c2", "time", "{}")]),
        ToolResponseMessage([ToolResponse("c1", "weather", "22C"), ToolResponse("c2", "time", "noon")]),
    ]
    assert to_openai(messages) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "22C"},
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
    ]


def test_openai_round_trip_keeps_text_tool_calls_ids_and_names():
    messages = [
        SystemMessage("sys"),
        UserMessage("weather and time?"),
        AssistantMessage(
            "let me check", [ToolCall("c1", "weather", '{"city":"Paris"}'), ToolCall("c2", "time", "{}")]
        ),
        ToolResponseMessage([ToolResponse("c1", "weather", "22C"), ToolResponse("c2", "time", "noon")]),
        AssistantMessage("22C at noon"),
        UserMessage(""),
        AssistantMessage(),
    ]
    assert from_openai(to_openai(messages)) == messages


def test_consecutive_tool_dicts_become_one_message_and_separate_runs_stay_apart():
    dicts = [
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "f"), _call("b", "g")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c", "h")]},
        {"role": "tool", "tool_call_id": "c", "content": "3"},
    ]
    messages = from_openai(dicts)
    assert [m.type for m in messages] == ["assistant", "tool", "assistant", "tool"]
    assert messages[1].tool_responses == (ToolResponse("a", "f", "1"), ToolResponse("b", "g", "2"))
    assert messages[3].tool_responses == (ToolResponse("c", "h", "3"),)
    assert to_openai(messages) == dicts


def test_tool_name_falls_back_to_the_dict_name_then_empty():
    messages = from_openai(
        [
            {"role": "tool", "tool_call_id": "x", "content": "1", "name": "lookup"},
            {"role": "tool", "tool_call_id": "y", "content": "2"},
        ]
    )
    assert messages == [ToolResponseMessage([ToolResponse("x", "lookup", "1"), ToolResponse("y", "", "2")])]


def test_content_parts_are_joined_and_developer_is_system():
    parts = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    assert from_openai([{"role": "user", "content": parts}]) == [UserMessage("Hello, world")]
    assert from_openai([{"role": "developer", "content": "rules"}]) == [SystemMessage("rules")]
    assert from_openai([{"role": "tool", "tool_call_id": "t", "content": parts}])[0].tool_responses[
        0
    ].content == ("Hello, world")


def test_assistant_content_null_and_empty_are_kept_apart():
    assert from_openai([{"role": "assistant", "content": None}])[0].text is None
    assert from_openai([{"role": "assistant", "content": ""}])[0].text == ""
    assert from_openai([{"role": "assistant"}])[0].text is None


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("hello", "message 1: expected a dict, got str"),
        ({"content": "x"}, "message 1: missing 'role'"),
        ({"role": "robot", "content": "x"}, "message 1: unknown role 'robot'"),
        ({"role": ["user"], "content": "x"}, "message 1: 'role' must be a string, got list"),  # issue 25
        ({"role": {"user": 1}, "content": "x"}, "message 1: 'role' must be a string, got dict"),
        ({"role": "tool", "content": "x"}, "message 1: tool message without a string 'tool_call_id'"),
        ({"role": "user", "content": 42}, "message 1: 'content' must be"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, "message 1: content part 0"),
        ({"role": "user", "content": ["text"]}, "message 1: content part 0 is not a dict"),
        ({"role": "assistant", "tool_calls": {"id": "c"}}, "message 1: 'tool_calls' must be a list"),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            "no string 'id'",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]},
            "arguments",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "web", "function": {}}]},
            "unsupported type",
        ),
        ({"role": "assistant", "tool_calls": [{"id": "c"}]}, "no 'function' dict"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
            "function 'name'",
        ),
    ],
)
def test_malformed_dicts_raise_value_error_naming_index_and_problem(item, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        from_openai([{"role": "user", "content": "first"}, item])


def test_to_openai_rejects_non_messages():
    with pytest.raises(ValueError, match="message 0: expected a Message"):
        to_openai([{"role": "user", "content": "x"}])


def _call(call_id: str, name: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


# --- values every backend stores exactly -----------------------------------------------------------


def test_user_message_text_is_required_but_may_be_empty():
    assert UserMessage("").text == ""
    with pytest.raises(ValueError, match="UserMessage text must be a string, got None"):
        UserMessage(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        (lambda: UserMessage("before\x00after"), "text contains a NUL character"),
        (lambda: AssistantMessage("\x00"), "text contains a NUL character"),
        (lambda: Message(MessageType.SYSTEM, "a\x00"), "text contains a NUL character"),
        (lambda: ToolCall("c\x00", "f", "{}"), "tool call id contains a NUL character"),
        (lambda: ToolCall("c", "f", '{"a": "\x00"}'), "tool call arguments contains a NUL character"),
        (lambda: ToolResponse("c", "f\x00", ""), "tool response name contains a NUL character"),
        (lambda: ToolResponse("c", "f", "x\x00"), "tool response content contains a NUL character"),
    ],
)
def test_a_nul_character_in_any_text_is_refused(build, problem):
    with pytest.raises(ValueError, match=problem):
        build()


@pytest.mark.parametrize("dicts", [None, 42, "user", {"role": "user", "content": "hi"}])
def test_from_openai_wants_a_list_of_dicts(dicts):
    with pytest.raises(
        ValueError, match=f"dicts must be a list of message dicts, got {type(dicts).__name__}"
    ):
        from_openai(dicts)


@pytest.mark.parametrize("role", ["user", "system", "developer"])
def test_from_openai_refuses_tool_calls_it_would_have_to_drop(role):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with pytest.raises(ValueError, match=f"message 1: a {role} message cannot have tool_calls"):
        from_openai([{"role": "user", "content": "hi"}, {"role": role, "content": "x", "tool_calls": [call]}])
    for nothing in (None, []):  # an empty list is no call to drop
        assert from_openai([{"role": role, "content": "x", "tool_calls": nothing}])[0].tool_calls == ()
