"""format_event and turn grouping (docs/api.md "Turns and format_event")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sessionledger.domain import (
    AssistantMessage,
    Message,
    MessageType,
    SessionEvent,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    format_event,
    turns,
)
from sessionledger.domain.turns import (
    format_message,
    format_message_bytes,
    starts_turn,
    turn_count,
    utf8_length,
)


def ev(message, *, branch=None, synthetic=False, id=None):
    metadata = {SessionEvent.SYNTHETIC: True} if synthetic else {}
    extra = {"id": id} if id else {}
    return SessionEvent(session_id="s", message=message, branch=branch, metadata=metadata, **extra)


WEATHER_CALL = ToolCall("c1", "get_weather", '{"location":"Paris"}')


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (UserMessage("u1"), "User: u1"),
        (AssistantMessage("a1"), "Assistant: a1"),
        (SystemMessage("be brief"), "System: be brief"),
        (UserMessage(""), "User: "),
        (AssistantMessage(), "Assistant: [no text content]"),
        (AssistantMessage(None, [WEATHER_CALL]), 'Assistant [tool calls: get_weather({"location":"Paris"})]'),
        (AssistantMessage("  ", [WEATHER_CALL]), 'Assistant [tool calls: get_weather({"location":"Paris"})]'),
        (
            AssistantMessage("checking", [WEATHER_CALL, ToolCall("c2", "time", "{}")]),
            'Assistant: checking [tool calls: get_weather({"location":"Paris"}), time({})]',
        ),
        (
            ToolResponseMessage([ToolResponse("c1", "get_weather", '{"temp":"22C"}')]),
            'Tool [responses: get_weather -> {"temp":"22C"}]',
        ),
        (
            ToolResponseMessage([ToolResponse("a", "f", "1"), ToolResponse("b", "g", "2")]),
            "Tool [responses: f -> 1, g -> 2]",
        ),
        (ToolResponseMessage([]), "Tool [responses: ]"),
        (Message(MessageType.USER, None), "User: [no text content]"),
    ],
)
def test_format_event(message, expected):
    assert format_event(ev(message)) == expected


def test_format_event_lengths_from_the_reference():
    lengths = [
        len(format_event(ev(UserMessage("u1")))),
        len(format_event(ev(AssistantMessage("a1")))),
        len(format_event(ev(AssistantMessage(None, [WEATHER_CALL])))),
        len(format_event(ev(ToolResponseMessage([ToolResponse("c1", "get_weather", '{"temp":"22C"}')])))),
    ]
    assert lengths == [8, 13, 57, 47]


def test_turn_starts_only_at_real_root_user_events():
    assert starts_turn(ev(UserMessage("q")))
    assert not starts_turn(ev(UserMessage("q"), synthetic=True))
    assert not starts_turn(ev(UserMessage("q"), branch="orch.researcher"))
    assert not starts_turn(ev(AssistantMessage("a")))


def test_turns_group_from_each_root_user_event():
    q1, a1, q2, t2, a2 = (
        ev(UserMessage("q1")),
        ev(AssistantMessage(None, [WEATHER_CALL])),
        ev(UserMessage("q2")),
        ev(ToolResponseMessage([ToolResponse("c1", "get_weather", "x")])),
        ev(AssistantMessage("a2")),
    )
    assert turns([q1, a1, q2, t2, a2]) == [[q1, a1], [q2, t2, a2]]
    assert turn_count([q1, a1, q2, t2, a2]) == 2


def test_events_before_the_first_turn_form_their_own_group():
    sys_, a0, q1, a1 = (
        ev(SystemMessage("s")),
        ev(AssistantMessage("hi")),
        ev(UserMessage("q1")),
        ev(AssistantMessage("a")),
    )
    assert turns([sys_, a0, q1, a1]) == [[sys_, a0], [q1, a1]]
    assert turns([a0, a1]) == [[a0, a1]]
    assert turns([]) == []


def test_synthetic_events_are_left_out_and_branch_users_do_not_split():
    shadow = ev(UserMessage("Summarize"), synthetic=True)
    summary = ev(AssistantMessage("summary"), synthetic=True)
    q1, a1 = ev(UserMessage("q1")), ev(AssistantMessage("a1"))
    bq, ba = (
        ev(UserMessage("sub"), branch="orch.researcher"),
        ev(AssistantMessage("sub a"), branch="orch.researcher"),
    )
    q2, a2 = ev(UserMessage("q2")), ev(AssistantMessage("a2"))
    assert turns([shadow, summary, q1, a1, bq, ba, q2, a2]) == [[q1, a1, bq, ba], [q2, a2]]
    assert turns([shadow, summary]) == []


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ([], 0),
        (["U", "A", "U", "A", "U", "A"], 3),
        (["sU", "sA", "U", "A"], 1),
        (["A", "A"], 0),
        (["U", "A", "bU", "bA", "U", "A"], 2),
    ],
)
def test_turn_count(kinds, expected):
    build = {
        "U": lambda: ev(UserMessage("q")),
        "A": lambda: ev(AssistantMessage("a")),
        "sU": lambda: ev(UserMessage("q"), synthetic=True),
        "sA": lambda: ev(AssistantMessage("a"), synthetic=True),
        "bU": lambda: ev(UserMessage("q"), branch="orch.researcher"),
        "bA": lambda: ev(AssistantMessage("a"), branch="orch.researcher"),
    }
    events = [build[kind]() for kind in kinds]
    assert turn_count(events) == expected
    assert len([g for g in turns(events) if starts_turn(g[0])]) == expected


# --- the rendering's size, counted without building it (`format_message_bytes`) ---------------------

# texts UTF-8 can encode: what a ledger stores
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
_CALLS = st.lists(st.builds(ToolCall, _TEXT, _TEXT, _TEXT), max_size=2)
_RESPONSES = st.lists(st.builds(ToolResponse, _TEXT, _TEXT, _TEXT), min_size=1, max_size=2)
_MESSAGES = st.one_of(
    st.builds(UserMessage, _TEXT),
    st.builds(SystemMessage, _TEXT),
    st.builds(AssistantMessage, st.none() | _TEXT, _CALLS),
    st.builds(ToolResponseMessage, _RESPONSES),
)


@given(_MESSAGES)
def test_the_rendering_size_is_the_rendering_encoded(message):
    assert format_message_bytes(message) == len(format_message(message).encode("utf-8"))


@pytest.mark.parametrize("text", ["", "plain ascii", "é", "漢字", "🙂 emoji", "mixed é and 🙂", "\u200b"])
def test_utf8_length_is_the_encoded_length(text):
    assert utf8_length(text) == len(text.encode("utf-8"))
    assert format_message_bytes(UserMessage(text)) == len(f"User: {text}".encode())
