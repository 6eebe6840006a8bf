"""langchain-core messages as ledger events, and back, exactly.

A LangChain message is stored as one event holding it twice over, without repeating anything:

- a readable `Message` (what search, recall, compaction, summaries and `sessionledger events` see):
  `HumanMessage` is a user message, `AIMessage` an assistant message with its `tool_calls` as tool
  calls (arguments as JSON text), `SystemMessage` a system message, `ToolMessage` and
  `FunctionMessage` a tool message with one tool response; a `ChatMessage` takes the type its role
  names (`user`, `assistant`, `system`, ...; any other role reads as a user message). Its text is
  the message's text (`BaseMessage.text`: the text blocks of a list of content blocks);
- the exact message, in the event's metadata: its class (`TYPE_KEY`, langchain-core's own
  `message.type` names, as `messages_from_dict` reads them) and, as JSON text (`FIELDS_KEY`), every
  field whose value is not the class's default. JSON text rather than a JSON value, so that what
  the ledger's JSON cannot hold (NUL characters, integers beyond 64 bits) reads back as written.
  A string `content` equal to the readable text is left out of that text and read back from the
  message, so a plain message stores its words once and most need no JSON at all.

An event that holds no LangChain message (a summary a compaction wrote, an event another adapter
wrote) reads as the plain message of its type: `HumanMessage`, `AIMessage` (with its tool calls),
`SystemMessage` or `ToolMessage`.

The functions: `to_event(session_id, message)` and `from_event(event)`, and `from_payload(payload)`
for a reader of the stored payloads (`SessionService.window_payloads`), which skips building events.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson
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
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langchain_core.messages import ToolCall as LangChainToolCall
from sessionledger.domain.codec import message_from_dict
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import Message, MessageType, ToolCall, ToolResponse, storable_text

TYPE_KEY = "langchainType"
"""The event metadata key naming the message's class (`message.type`: "human", "AIMessageChunk")."""
FIELDS_KEY = "langchainFields"
"""The event metadata key holding the JSON text of the message's fields that are not defaults;
absent when there are none. No `content` in it: the content is the readable text."""
LONG_NUMBERS_KEY = "langchainLongNumbers"
"""Set when the fields' text may hold an integer beyond 64 bits, which only the stdlib parser reads
exactly (orjson reads it as a float)."""

_CLASSES: dict[str, type[BaseMessage]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        HumanMessage,
        AIMessage,
        SystemMessage,
        ChatMessage,
        FunctionMessage,
        ToolMessage,
        AIMessageChunk,
        HumanMessageChunk,
        SystemMessageChunk,
        ChatMessageChunk,
        FunctionMessageChunk,
        ToolMessageChunk,
    )
}


def _defaults(cls: type[BaseMessage]) -> list[tuple[str, Callable[[], Any]]]:
    """Each field of `cls` with what makes its default: its factory, else its (immutable) value."""
    made: list[tuple[str, Callable[[], Any]]] = []
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            made.append((name, field.default_factory))  # type: ignore[arg-type]  # none takes data
        else:
            made.append((name, functools.partial(_same, field.default)))
    return made


def _same(value: Any) -> Any:
    return value


_DEFAULTS = {cls: _defaults(cls) for cls in _CLASSES.values()}
_CHAT_ROLES = {
    "user": MessageType.USER,
    "human": MessageType.USER,
    "assistant": MessageType.ASSISTANT,
    "ai": MessageType.ASSISTANT,
    "system": MessageType.SYSTEM,
    "developer": MessageType.SYSTEM,
}
_LONG_DIGITS = re.compile(r"\d{19}")


def to_event(session_id: str, message: BaseMessage, *, event_id: str | None = None) -> SessionEvent:
    """The event that stores `message` in the session (a new id unless `event_id` is given).

    `ValueError` for what is not a langchain-core message of a stored type (a `RemoveMessage` is
    an instruction to a graph, not a message) or holds a value JSON cannot (an `artifact` object)."""
    kind = getattr(message, "type", None)
    # `kind` is anything a caller's object has: a wrong one is not among the classes
    if not isinstance(message, BaseMessage) or _CLASSES.get(kind) is not type(message):  # type: ignore[arg-type]
        raise ValueError(f"not a langchain-core chat message: {type(message).__name__}")
    readable = _readable(message)
    fields = message.model_dump(exclude_defaults=True)
    if fields.get("content") == _readable_text(readable):
        del fields["content"]  # the readable text holds it exactly (a str: nothing else is equal)
    metadata: dict[str, Any] = {TYPE_KEY: kind}
    if fields:
        text = _dumps(fields, type(message).__name__)
        metadata[FIELDS_KEY] = text
        if _LONG_DIGITS.search(text):
            metadata[LONG_NUMBERS_KEY] = True
    if event_id is None:
        return SessionEvent(session_id=session_id, message=readable, metadata=metadata)
    return SessionEvent(session_id=session_id, message=readable, metadata=metadata, id=event_id)


def _dumps(fields: dict[str, Any], what: str) -> str:
    """The fields as JSON text the ledger can store: UTF-8 as it is, escaped where it is not (a
    lone surrogate); the stdlib's writer, which keeps integers of any size, NaN and infinities."""
    try:
        text = json.dumps(fields, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"a {what} must hold JSON values: {error}") from None
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(fields)
    return text


def from_event(event: SessionEvent) -> BaseMessage:
    """The message `event` stores; the plain message of its type for an event holding none."""
    message = event.message
    return _message(event.metadata, message.type.value, _readable_text(message), lambda: message)


def from_payload(payload: Mapping[str, Any]) -> BaseMessage:
    """`from_event` of the event whose stored payload (`event_to_payload`) is `payload`."""
    fields = payload["message"]
    kind = fields["type"]
    responses = fields["tool_responses"]
    text = responses[0]["content"] if kind == "tool" and responses else fields["text"]
    return _message(payload["metadata"], kind, text, lambda: message_from_dict(fields))


def _readable(message: BaseMessage) -> Message:
    """What the ledger's readers see of `message` (the module's docstring says how)."""
    text = storable_text(str(message.text))  # a str subclass (`TextAccessor`): the ledger stores plain str
    if isinstance(message, AIMessage):
        calls = tuple(_tool_call(call) for call in message.tool_calls)
        return Message._trusted(MessageType.ASSISTANT, text, calls, (), {})
    if isinstance(message, ToolMessage | FunctionMessage):
        call_id = storable_text(message.tool_call_id) if isinstance(message, ToolMessage) else ""
        response = ToolResponse(call_id, storable_text(message.name or ""), text)
        return Message._trusted(MessageType.TOOL, "", (), (response,), {})
    if isinstance(message, ChatMessage):
        role = _CHAT_ROLES.get(message.role.lower(), MessageType.USER)
        return Message._trusted(role, text, (), (), {})
    kind = MessageType.SYSTEM if isinstance(message, SystemMessage) else MessageType.USER
    return Message._trusted(kind, text, (), (), {})


def _tool_call(call: LangChainToolCall) -> ToolCall:
    # `repr` for what JSON cannot hold, so that `to_event` refuses it with its own ValueError
    arguments = json.dumps(call["args"], ensure_ascii=False, default=repr)
    return ToolCall(
        storable_text(call.get("id") or ""), storable_text(call["name"]), storable_text(arguments)
    )


def _readable_text(message: Message) -> str | None:
    """The text a message's content is compared with: a tool message's is its response's."""
    if message.type is MessageType.TOOL:
        return message.tool_responses[0].content if message.tool_responses else ""
    return message.text


def _message(
    metadata: Mapping[str, Any], kind: str, text: str | None, ledger_message: Callable[[], Message]
) -> BaseMessage:
    """The LangChain message an event stores, from its metadata and readable text; `ledger_message`
    builds the whole ledger message, which only an event holding no LangChain message needs."""
    cls = _CLASSES.get(metadata.get(TYPE_KEY))  # type: ignore[arg-type]  # absent: not a LangChain message
    if cls is None:
        return _plain(ledger_message())
    stored = metadata.get(FIELDS_KEY)
    fields: dict[str, Any] = {} if stored is None else _loads(stored, LONG_NUMBERS_KEY in metadata)
    if "content" not in fields:
        fields["content"] = text
    # as stored, not validated again: a chunk's validator derives its tool calls from its tool-call
    # chunks, which changes a message whose fields were not derived that way (`messages_from_dict`
    # reads such an `AIMessageChunk` back with other tool calls than it was written with). Every
    # field is given: pydantic's own defaults cost an `inspect.signature` per factory and message.
    stored_names = set(fields)
    for name, default in _DEFAULTS[cls]:
        if name not in stored_names:
            fields[name] = default()
    return cls.model_construct(stored_names, **fields)


def _loads(text: str, long_numbers: bool) -> dict[str, Any]:
    """The fields `_dumps` wrote (a JSON object: the parsers' `Any` is one here)."""
    if long_numbers:
        return json.loads(text)  # type: ignore[no-any-return]  # an object, as written
    try:
        return orjson.loads(text)  # type: ignore[no-any-return]  # an object, as written
    except orjson.JSONDecodeError:  # NaN or infinity, which the stdlib writes and reads
        return json.loads(text)  # type: ignore[no-any-return]  # an object, as written


def _plain(message: Message) -> BaseMessage:
    """The LangChain message of a ledger message written by another hand."""
    text = message.text or ""
    if message.type is MessageType.USER:
        return HumanMessage(text)
    if message.type is MessageType.SYSTEM:
        return SystemMessage(text)
    if message.type is MessageType.TOOL:
        response = message.tool_responses[0] if message.tool_responses else ToolResponse("", "", "")
        return ToolMessage(response.content, tool_call_id=response.id, name=response.name or None)
    calls = [
        LangChainToolCall(name=c.name, args=_arguments(c.arguments), id=c.id or None, type="tool_call")
        for c in message.tool_calls
    ]
    return AIMessage(text, tool_calls=calls)


def _arguments(text: str) -> dict[str, Any]:
    """A tool call's arguments as LangChain holds them (a dict); `{}` when they are not an object."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
