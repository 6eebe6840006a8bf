"""The JSON codec: exact round trips, the JSON checks and the validating decode."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessionledger.domain import (
    AssistantMessage,
    Message,
    MessageType,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.domain.codec import (
    ensure_json,
    event_from_payload,
    event_to_payload,
    format_timestamp,
    message_from_dict,
    message_to_dict,
    parse_timestamp,
)


def through_json(event: SessionEvent, *, validate: bool = False, archived: bool = False) -> SessionEvent:
    payload = json.loads(json.dumps(event_to_payload(event)))
    return event_from_payload(event.session_id, event.id, payload, archived, validate=validate)


def assert_same(decoded: SessionEvent, event: SessionEvent) -> None:
    for name in (
        "id",
        "session_id",
        "timestamp",
        "message",
        "metadata",
        "branch",
        "invocation_id",
        "state_delta",
    ):
        assert getattr(decoded, name) == getattr(event, name), name
    assert type(decoded) is SessionEvent and type(decoded.message) is Message


def test_payload_layout():
    event = SessionEvent(
        session_id="s",
        id="e",
        timestamp=datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        message=AssistantMessage("hi", [ToolCall("c", "f", "{}")]),
        metadata={"k": 1},
        branch="orch",
        invocation_id="inv",
        state_delta={"x": None},
    )
    assert event_to_payload(event) == {
        "message": {
            "type": "assistant",
            "text": "hi",
            "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}],
            "tool_responses": [],
            "metadata": {},
        },
        "metadata": {"k": 1},
        "branch": "orch",
        "invocation_id": "inv",
        "state_delta": {"x": None},
        "timestamp": "2025-01-02T03:04:05.000006+00:00",
    }


@pytest.mark.parametrize(
    "message",
    [
        UserMessage('héllo 🌍 \u0001 "quoted"'),
        AssistantMessage(),
        AssistantMessage(""),
        AssistantMessage(None, [ToolCall("c1", "f", '{"a": [1, 2]}'), ToolCall("c2", "g", "")]),
        ToolResponseMessage([ToolResponse("c1", "f", "r1"), ToolResponse("c2", "g", "")]),
        ToolResponseMessage([]),
        Message(MessageType.SYSTEM, "sys", metadata={"nested": {"list": [1, 2.5, None, True]}}),
    ],
)
@pytest.mark.parametrize("validate", [False, True])
def test_event_round_trip_is_exact(message, validate):
    event = SessionEvent(
        session_id="s1",
        message=message,
        metadata={SessionEvent.SYNTHETIC: True, "big": 2**63 - 1, "small": -(2**63), "f": 0.1 + 0.2},
        state_delta={"app:k": {"d": [1]}, "n": None},
        branch="a.b",
        invocation_id="inv-1",
    )
    decoded = through_json(event, validate=validate, archived=True)
    assert_same(decoded, event)
    assert decoded.archived is True
    assert decoded.message.text == message.text  # None stays None, "" stays ""


def test_timestamps_keep_microseconds_and_become_utc():
    moment = datetime(2025, 6, 1, 14, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    text = format_timestamp(moment)
    assert text == "2025-06-01T12:00:00.123456+00:00"
    assert parse_timestamp(text) == moment and parse_timestamp(text).tzinfo is UTC
    assert parse_timestamp("2025-06-01T12:00:00Z") == datetime(2025, 6, 1, 12, tzinfo=UTC)
    assert format_timestamp(datetime(2025, 1, 1, tzinfo=UTC)).endswith(".000000+00:00")
    with pytest.raises(ValueError, match="without a timezone"):
        parse_timestamp("2025-06-01T12:00:00")


@given(st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))])))
def test_a_timestamp_is_one_text_however_often_and_in_whatever_order_it_is_formatted(moment):
    expected = moment.astimezone(UTC).isoformat(timespec="microseconds")
    other = moment + timedelta(microseconds=1)
    assert [format_timestamp(moment), format_timestamp(moment), format_timestamp(other)] == [
        expected,
        expected,
        other.astimezone(UTC).isoformat(timespec="microseconds"),
    ]
    equal_copy = moment.replace()  # equal, another object
    assert format_timestamp(equal_copy) == expected


def test_message_dict_round_trip():
    message = AssistantMessage("t", [ToolCall("c", "f", "{}")], metadata={"m": "v"})
    assert message_from_dict(json.loads(json.dumps(message_to_dict(message)))) == message


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({1: "x"}, "key 1 at top level is not a string"),
        ({"a": {(1, 2): "x"}}, "key (1, 2) at ['a'] is not a string"),
        ({"s": {1, 2}}, "['s'] has type set"),
        ({"o": object()}, "['o'] has type object"),
        ({"n": float("nan")}, "['n'] is nan"),
        ({"l": [1, float("inf")]}, "['l'][1] is inf"),
        ({"d": datetime(2025, 1, 1, tzinfo=UTC)}, "['d'] has type datetime"),
        ({"b": b"bytes"}, "['b'] has type bytes"),
        ({"n": [2**63]}, "['n'][0] is 9223372036854775808, beyond 64 bits"),
        ({"n": {"m": -(2**63) - 1}}, "['n']['m'] is -9223372036854775809, beyond 64 bits"),
        ({"s": "a\x00b"}, "['s'] contains a NUL character"),
        ({"l": ["ok", "\x00"]}, "['l'][1] contains a NUL character"),
        ({"a": {"k\x00": 1}}, "key 'k\\x00' at ['a'] contains a NUL character"),
    ],
)
def test_ensure_json_names_what_and_where(value, problem):
    with pytest.raises(ValueError) as raised:
        ensure_json(value, "metadata")
    assert str(raised.value).startswith("metadata is not JSON-serializable")
    assert problem in str(raised.value)


def test_ensure_json_accepts_plain_json_and_rejects_cycles():
    ensure_json({"a": [1, 2.5, None, True, "x", {"b": []}], "big": 2**63 - 1, "small": -(2**63)}, "state")
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="state is not JSON-serializable"):
        ensure_json({"c": cyclic}, "state")


@pytest.mark.parametrize(
    ("field", "value", "what"),
    [("metadata", {"s": {1}}, "metadata"), ("state_delta", {"x": float("nan")}, "state_delta")],
)
def test_event_to_payload_refuses_non_json(field, value, what):
    event = SessionEvent(session_id="s", message=UserMessage("x"), **{field: value})
    with pytest.raises(ValueError, match=f"^{what} is not JSON-serializable"):
        event_to_payload(event)
    with pytest.raises(ValueError, match="message metadata is not JSON-serializable"):
        event_to_payload(SessionEvent(session_id="s", message=UserMessage("x", metadata={2: "x"})))


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.pop("message"),
        lambda p: p["message"].update(type="robot"),
        lambda p: p["message"].update(tool_calls=[{"id": "c"}]),
        lambda p: p["message"].update(tool_calls=0),  # an empty list is one thing, a falsy non-list another
        lambda p: p["message"].update(tool_responses=None),
        lambda p: p["message"].update(tool_calls="abc"),
        lambda p: p.update(timestamp="2025-01-01T00:00:00"),
        lambda p: p.update(metadata=[1]),
        lambda p: p.update(branch=""),
        lambda p: p.update(state_delta={"x": float("inf")}),
    ],
)
def test_validating_decode_rejects_malformed_payloads(damage):
    payload = event_to_payload(SessionEvent(session_id="s", message=UserMessage("x")))
    damage(payload)
    with pytest.raises(ValueError):
        event_from_payload("s", "e", payload, validate=True)


def test_validating_decode_rejects_an_empty_session_id():
    payload = event_to_payload(SessionEvent(session_id="s", message=UserMessage("x")))
    with pytest.raises(ValueError, match="session_id must not be empty"):
        event_from_payload("", "e", payload, validate=True)


# --- property: any valid event survives the JSON round trip exactly -------------------------------------


def texts(**size: int) -> st.SearchStrategy[str]:
    """Any text a stored value may hold: every character but NUL."""
    return st.text(st.characters(exclude_characters="\x00"), **size)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(texts(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(texts(max_size=8), json_values, max_size=4)
ids = texts(min_size=1, max_size=12)
tool_calls = st.builds(ToolCall, ids, texts(max_size=10), texts(max_size=20))
tool_responses = st.builds(ToolResponse, ids, texts(max_size=10), texts(max_size=20))
messages = st.one_of(
    st.builds(UserMessage, texts(), metadata=json_objects),
    st.builds(AssistantMessage, st.none() | texts(), st.lists(tool_calls, max_size=3), metadata=json_objects),
    st.builds(ToolResponseMessage, st.lists(tool_responses, max_size=3)),
    st.builds(lambda text: Message(MessageType.SYSTEM, text), st.none() | texts()),
)
timestamps = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
) | st.datetimes(timezones=st.just(timezone(timedelta(hours=-5))), min_value=datetime(1970, 1, 2))
events = st.builds(
    SessionEvent,
    session_id=ids,
    id=ids,
    message=messages,
    timestamp=timestamps,
    metadata=json_objects,
    branch=st.none() | ids,
    invocation_id=st.none() | texts(max_size=8),
    state_delta=json_objects,
)


@settings(max_examples=150, deadline=None)
@given(events, st.booleans())
def test_codec_round_trip_property(event, validate):
    assert_same(through_json(event, validate=validate), event)


def test_ensure_json_wants_dicts_not_other_mappings():
    from types import MappingProxyType

    with pytest.raises(ValueError, match=r"\['m'\] has type mappingproxy"):
        ensure_json({"m": MappingProxyType({})}, "metadata")
    frozen = SessionEvent(session_id="s", message=UserMessage("x"), metadata={"a": 1}).metadata
    ensure_json({"frozen": frozen}, "metadata")
