"""Every langchain-core message type reads back from the ledger exactly as it was written (random
messages of every type, field by field, on memory, SQLite and PostgreSQL), and the ledger's own
readers (search, recall, `sessionledger events`) see a LangChain conversation's text, tool calls
and tool responses like any other."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from sessionledger.domain import EventFilter
from sessionledger.domain.codec import event_to_payload
from sessionledger.domain.messages import (
    AssistantMessage,
    MessageType,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.langchain import LedgerChatMessageHistory
from sessionledger.infrastructure.langchain.messages import from_event, from_payload, to_event

# texts with what the ledger's own text cannot hold (NUL, a lone surrogate) among the rest
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    ["", "plain words", "a\x00b", "\ud800 lone", "ünïcode ✓"]
)
OPTIONAL_TEXT = st.none() | TEXT
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | TEXT
)
JSON: Any = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
JSON_OBJECT = st.dictionaries(TEXT, JSON, max_size=3)
CONTENT = TEXT | st.lists(
    TEXT
    | st.builds(lambda t: {"type": "text", "text": t}, TEXT)
    | st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, TEXT)
    | JSON_OBJECT,
    max_size=3,
)
TOOL_CALL = st.fixed_dictionaries(
    {"name": TEXT, "args": JSON_OBJECT, "id": OPTIONAL_TEXT, "type": st.just("tool_call")}
)
INVALID_TOOL_CALL = st.fixed_dictionaries(
    {
        "name": OPTIONAL_TEXT,
        "args": OPTIONAL_TEXT,
        "id": OPTIONAL_TEXT,
        "error": OPTIONAL_TEXT,
        "type": st.just("invalid_tool_call"),
    }
)
TOOL_CALL_CHUNK = st.fixed_dictionaries(
    {
        "name": OPTIONAL_TEXT,
        "args": OPTIONAL_TEXT | st.just('{"city": "Paris"}'),
        "id": OPTIONAL_TEXT,
        "index": st.none() | st.integers(0, 3),
        "type": st.just("tool_call_chunk"),
    }
)
TOKENS = st.integers(0, 10**6)
USAGE = st.none() | st.fixed_dictionaries(
    {"input_tokens": TOKENS, "output_tokens": TOKENS, "total_tokens": TOKENS},
    optional={
        "input_token_details": st.fixed_dictionaries({}, optional={"cache_read": TOKENS, "audio": TOKENS}),
        "output_token_details": st.fixed_dictionaries({}, optional={"reasoning": TOKENS}),
    },
)
COMMON = {
    "content": CONTENT,
    "additional_kwargs": JSON_OBJECT,
    "response_metadata": JSON_OBJECT,
    "id": OPTIONAL_TEXT,
    "name": OPTIONAL_TEXT,
}


def _of(cls: type[BaseMessage], **extra: Any) -> st.SearchStrategy[BaseMessage]:
    return st.fixed_dictionaries({**COMMON, **extra}).map(lambda fields: cls(**fields))


AI_FIELDS = {
    "tool_calls": st.lists(TOOL_CALL, max_size=2),
    "invalid_tool_calls": st.lists(INVALID_TOOL_CALL, max_size=2),
    "usage_metadata": USAGE,
}
TOOL_FIELDS = {"tool_call_id": TEXT, "artifact": JSON, "status": st.sampled_from(["success", "error"])}
MESSAGE: st.SearchStrategy[BaseMessage] = st.one_of(
    _of(HumanMessage),
    _of(HumanMessageChunk),
    _of(SystemMessage),
    _of(SystemMessageChunk),
    _of(AIMessage, **AI_FIELDS),
    _of(AIMessageChunk, **AI_FIELDS),
    _of(
        AIMessageChunk,
        tool_call_chunks=st.lists(TOOL_CALL_CHUNK, max_size=2),
        chunk_position=st.sampled_from([None, "last"]),
    ),
    _of(ToolMessage, **TOOL_FIELDS),
    _of(ToolMessageChunk, **TOOL_FIELDS),
    _of(ChatMessage, role=TEXT | st.sampled_from(["user", "assistant", "system", "tool"])),
    _of(ChatMessageChunk, role=TEXT),
    st.fixed_dictionaries({**COMMON, "name": TEXT}).map(lambda fields: FunctionMessage(**fields)),
    st.fixed_dictionaries({**COMMON, "name": TEXT}).map(lambda fields: FunctionMessageChunk(**fields)),
)


def assert_same(read: list[BaseMessage], written: list[BaseMessage]) -> None:
    """Equal as LangChain compares messages, and field by field, each of the written message's class."""
    assert [type(message) for message in read] == [type(message) for message in written]
    for got, expected in zip(read, written, strict=True):
        assert got.model_dump() == expected.model_dump()
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(MESSAGE)
def test_a_message_converts_to_an_event_and_back_exactly(message: BaseMessage) -> None:
    event = to_event("s", message)
    assert_same([from_event(event)], [message])
    assert_same([from_payload(event_to_payload(event))], [message])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=st.lists(MESSAGE, min_size=1, max_size=6), one_by_one=st.booleans())
def test_every_message_type_reads_back_from_the_ledger_exactly(
    service: SessionService, written: list[BaseMessage], one_by_one: bool
) -> None:
    history = LedgerChatMessageHistory(f"lc-{uuid.uuid4().hex}", service=service, user_id="u")
    if one_by_one:
        for message in written:
            history.add_message(message)
    else:
        history.add_messages(written)
    assert_same(history.messages, written)
    assert_same(LedgerChatMessageHistory(history.session_id, service=service, user_id="u").messages, written)


def test_the_ledger_sees_text_tool_calls_and_tool_responses(
    service: SessionService, unique: Callable[[str], str]
) -> None:
    lc_readable = unique("lc-readable")
    history = LedgerChatMessageHistory(lc_readable, service=service, user_id="u")
    history.add_messages(
        [
            SystemMessage("Be brief."),
            HumanMessage([{"type": "text", "text": "Weather in"}, {"type": "text", "text": " Paris?"}]),
            AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call-1"}]),
            ToolMessage("sunny, 24 C", tool_call_id="call-1", name="weather"),
            FunctionMessage("ok", name="legacy"),
            ChatMessage("from the assistant", role="assistant"),
            AIMessage("It is sunny."),
        ]
    )
    messages = service.get_messages(lc_readable)
    assert [m.type for m in messages] == [
        MessageType.SYSTEM,
        MessageType.USER,
        MessageType.ASSISTANT,
        MessageType.TOOL,
        MessageType.TOOL,
        MessageType.ASSISTANT,
        MessageType.ASSISTANT,
    ]
    assert messages[1].text == "Weather in Paris?"
    assert messages[2].tool_calls == (ToolCall("call-1", "weather", '{"city": "Paris"}'),)
    assert messages[3].tool_responses == (ToolResponse("call-1", "weather", "sunny, 24 C"),)
    assert messages[4].tool_responses == (ToolResponse("", "legacy", "ok"),)
    found = service.get_events(lc_readable, EventFilter.keyword_search("paris", 0, 10))
    assert [event.message.text for event in found] == ["Weather in Paris?"]


def test_an_event_another_hand_wrote_reads_as_the_plain_message_of_its_type(
    service: SessionService, unique: Callable[[str], str]
) -> None:
    lc_foreign = unique("lc-foreign")
    history = LedgerChatMessageHistory(lc_foreign, service=service, user_id="u")
    history.add_message(HumanMessage("first"))  # creates the session
    for message in (
        UserMessage("a summary, say"),
        AssistantMessage("calling", [ToolCall("c1", "lookup", '{"q": 1}')]),
        ToolResponseMessage([ToolResponse("c1", "lookup", "found")]),
    ):
        service.append_message(lc_foreign, message)
    assert history.messages == [
        HumanMessage("first"),
        HumanMessage("a summary, say"),
        AIMessage("calling", tool_calls=[{"name": "lookup", "args": {"q": 1}, "id": "c1"}]),
        ToolMessage("found", tool_call_id="c1", name="lookup"),
    ]


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (HumanMessage("x"), MessageType.USER),
        (HumanMessageChunk("x"), MessageType.USER),
        (SystemMessage("x"), MessageType.SYSTEM),
        (SystemMessageChunk("x"), MessageType.SYSTEM),
        (AIMessage("x"), MessageType.ASSISTANT),
        (AIMessageChunk("x"), MessageType.ASSISTANT),
        (ToolMessage("x", tool_call_id="c"), MessageType.TOOL),
        (ToolMessageChunk("x", tool_call_id="c"), MessageType.TOOL),
        (FunctionMessage("x", name="f"), MessageType.TOOL),
        (FunctionMessageChunk("x", name="f"), MessageType.TOOL),
        (ChatMessage("x", role="Assistant"), MessageType.ASSISTANT),
        (ChatMessageChunk("x", role="developer"), MessageType.SYSTEM),
        (ChatMessage("x", role="critic"), MessageType.USER),
    ],
    ids=repr,
)
def test_each_class_is_the_ledger_message_of_its_kind(message: BaseMessage, kind: MessageType) -> None:
    readable = to_event("s", message).message
    assert readable.type is kind
    if kind is MessageType.TOOL:
        assert [response.content for response in readable.tool_responses] == ["x"]
    else:
        assert readable.text == "x"


@pytest.mark.parametrize(
    "value", [RemoveMessage(id="m1"), "text", {"role": "user", "content": "hi"}], ids=repr
)
def test_what_is_not_a_stored_chat_message_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="not a langchain-core chat message"):
        to_event("s", value)


def test_a_value_json_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="must hold JSON values"):
        to_event("s", ToolMessage("x", tool_call_id="c", artifact=object()))
