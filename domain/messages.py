"""Chat messages as immutable values, and their OpenAI chat-completions form.

The model follows Spring AI's `Message` (docs/api.md "Messages"): a type, an optional
text, tool calls on assistant messages and tool responses on tool messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from sessionledger.domain.fast_constructor import fast_constructor
from sessionledger.domain.mappings import EMPTY, freeze


class MessageType(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


_NUL = "\x00"
"""Refused in every text: PostgreSQL cannot extract a JSON string holding it, so keyword search
would fail there (and SQLite's would stop at it); no backend stores it."""


def _plain_texts(a: object, b: object, c: object) -> bool:
    """All three are strings without NUL: the quick test (`_reject_bad_fields` says what is wrong)."""
    return (
        isinstance(a, str)
        and isinstance(b, str)
        and isinstance(c, str)
        and _NUL not in a
        and _NUL not in b
        and _NUL not in c
    )


_Texts = TypeVar("_Texts", bound="ToolCall | ToolResponse")


def _unchecked(cls: type[_Texts], *fields: str) -> _Texts:
    """A tool call or response built without validation, for decoded ledger values (as
    `Message._trusted`): what was stored before a rule existed stays readable."""
    value = object.__new__(cls)
    for name, field in zip(cls.__slots__, fields, strict=True):
        object.__setattr__(value, name, field)
    return value


def _reject_bad_fields(value: ToolCall | ToolResponse, what: str) -> None:
    for name in value.__slots__:
        field = getattr(value, name)
        if not isinstance(field, str):
            raise ValueError(f"{what} {name} must be a string, got {type(field).__name__}")
        if _NUL in field:
            raise ValueError(f"{what} {name} contains a NUL character (\\x00)")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call the model asked for; `arguments` is the raw JSON string it produced."""

    id: str
    name: str
    arguments: str

    def __post_init__(self) -> None:
        if not _plain_texts(self.id, self.name, self.arguments):
            _reject_bad_fields(self, "tool call")

    @classmethod
    def _trusted(cls, id: str, name: str, arguments: str) -> ToolCall:
        return _unchecked(cls, id, name, arguments)


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The result of one tool call, matched to it by `id`."""

    id: str
    name: str
    content: str

    def __post_init__(self) -> None:
        if not _plain_texts(self.id, self.name, self.content):
            _reject_bad_fields(self, "tool response")

    @classmethod
    def _trusted(cls, id: str, name: str, content: str) -> ToolResponse:
        return _unchecked(cls, id, name, content)


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message; value equality over all fields (metadata included)."""

    type: MessageType
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_responses: tuple[ToolResponse, ...] = ()
    metadata: Mapping[str, Any] = EMPTY

    def __post_init__(self) -> None:
        kind, calls, responses = _checked_fields(self.type, self.text, self.tool_calls, self.tool_responses)
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "tool_calls", calls)
        object.__setattr__(self, "tool_responses", responses)
        object.__setattr__(self, "metadata", freeze(self.metadata, "metadata"))

    @classmethod
    def _checked(
        cls,
        type: MessageType | str,
        text: str | None,
        tool_calls: Iterable[ToolCall],
        tool_responses: Iterable[ToolResponse],
        metadata: Mapping[str, Any] | None,
    ) -> Message:
        """The message of these fields, checked as the constructor checks them: for a caller that
        has every field already (see `SessionEvent._checked`)."""
        kind, calls, responses = _checked_fields(type, text, tool_calls, tool_responses)
        return cls._trusted(kind, text, calls, responses, freeze(metadata, "metadata"))

    def __hash__(self) -> int:
        # metadata values may be unhashable; equal messages still hash equal without it
        return hash((self.type, self.text, self.tool_calls, self.tool_responses))

    @classmethod
    def _trusted(
        cls,
        type: MessageType,
        text: str | None,
        tool_calls: tuple[ToolCall, ...],
        tool_responses: tuple[ToolResponse, ...],
        metadata: Mapping[str, Any],
    ) -> Message:
        """Build without validation, for decoded ledger values (see `SessionEvent._trusted`)."""
        return _build_message(type, text, tool_calls, tool_responses, freeze(metadata))


def _checked_fields(
    declared: object, text: object, tool_calls: Iterable[object], tool_responses: Iterable[object]
) -> tuple[MessageType, tuple[ToolCall, ...], tuple[ToolResponse, ...]]:
    """The constructor's checks of a message's fields (`ValueError` saying what is wrong), shared
    by `Message._checked`: its type as a `MessageType`, and its tool calls and responses as tuples."""
    try:
        kind = MessageType(declared)  # type: ignore[arg-type]  # any value: a wrong one is refused here
    except ValueError:
        raise ValueError(f"unknown message type {declared!r}") from None
    if text is not None:
        if not isinstance(text, str):
            raise ValueError(f"text must be a string or None, got {type(text).__name__}")
        if _NUL in text:
            raise ValueError("text contains a NUL character (\\x00)")
    calls = tuple(tool_calls)
    responses = tuple(tool_responses)
    if calls and kind is not MessageType.ASSISTANT:
        raise ValueError("only an assistant message can have tool calls")
    if responses and kind is not MessageType.TOOL:
        raise ValueError("only a tool message can have tool responses")
    if not all(isinstance(c, ToolCall) for c in calls):
        raise ValueError("tool_calls must contain ToolCall values")
    if not all(isinstance(r, ToolResponse) for r in responses):
        raise ValueError("tool_responses must contain ToolResponse values")
    return kind, calls, responses  # type: ignore[return-value]  # each element checked above


_build_message = fast_constructor(Message, ("type", "text", "tool_calls", "tool_responses", "metadata"))


def UserMessage(text: str, *, metadata: Mapping[str, Any] | None = None) -> Message:
    """What the user said; `""` is a message, `None` is not (as in Spring AI)."""
    if text is None:
        raise ValueError("UserMessage text must be a string, got None")
    return Message(MessageType.USER, text, metadata=freeze(metadata, "metadata"))


def SystemMessage(text: str, *, metadata: Mapping[str, Any] | None = None) -> Message:
    return Message(MessageType.SYSTEM, text, metadata=freeze(metadata, "metadata"))


def AssistantMessage(
    text: str | None = None,
    tool_calls: Iterable[ToolCall] = (),
    *,
    metadata: Mapping[str, Any] | None = None,
) -> Message:
    """An assistant reply; neither text nor tool calls is allowed (an empty reply)."""
    return Message(MessageType.ASSISTANT, text, tuple(tool_calls), metadata=freeze(metadata, "metadata"))


def ToolResponseMessage(
    responses: Iterable[ToolResponse], *, metadata: Mapping[str, Any] | None = None
) -> Message:
    """The results of one or more tool calls; its text is `""` as in Spring AI."""
    return Message(
        MessageType.TOOL, "", tool_responses=tuple(responses), metadata=freeze(metadata, "metadata")
    )


# --- OpenAI chat-completions format ----------------------------------------------------------


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as OpenAI chat-completions dicts; a tool message becomes one dict per response."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise ValueError(f"message {index}: expected a Message, got {type(message).__name__}")
        if message.type is MessageType.TOOL:
            out.extend(
                {"role": "tool", "tool_call_id": r.id, "content": r.content} for r in message.tool_responses
            )
            continue
        item: dict[str, Any] = {"role": message.type.value, "content": message.text}
        if message.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        out.append(item)
    return out


_ROLES = {
    "user": MessageType.USER,
    "assistant": MessageType.ASSISTANT,
    "system": MessageType.SYSTEM,
    "developer": MessageType.SYSTEM,
    "tool": MessageType.TOOL,
}


def from_openai(dicts: Iterable[Mapping[str, Any]]) -> list[Message]:
    """OpenAI chat-completions dicts as messages; consecutive tool dicts become one tool message.

    A tool response takes its name from the earlier assistant tool call with the same id, else from
    the dict's `"name"`, else `""`. Malformed input raises `ValueError` naming the index.
    """
    if isinstance(dicts, str | bytes | Mapping) or not isinstance(dicts, Iterable):
        raise ValueError(f"dicts must be a list of message dicts, got {type(dicts).__name__}")
    messages: list[Message] = []
    call_names: dict[str, str] = {}
    pending: list[ToolResponse] = []
    for index, item in enumerate(dicts):
        try:
            kind = _role(item)
            if kind is MessageType.TOOL:
                pending.append(_tool_response(item, call_names))
                continue
            if pending:
                messages.append(ToolResponseMessage(pending))
                pending = []
            text = _content(item.get("content"))
            if kind is MessageType.ASSISTANT:
                calls = _tool_calls(item.get("tool_calls"))
                call_names.update((c.id, c.name) for c in calls)
                messages.append(AssistantMessage(text, calls))
            else:
                if item.get("tool_calls"):
                    raise ValueError(f"a {item['role']} message cannot have tool_calls")
                messages.append(Message(kind, text))
        except ValueError as error:
            raise ValueError(f"message {index}: {error}") from None
    if pending:
        messages.append(ToolResponseMessage(pending))
    return messages


def _role(item: Any) -> MessageType:
    if not isinstance(item, Mapping):
        raise ValueError(f"expected a dict, got {type(item).__name__}")
    role = item.get("role")
    if role is None:
        raise ValueError("missing 'role'")
    if not isinstance(role, str):  # a list or dict is unhashable: a TypeError from the lookup
        raise ValueError(f"'role' must be a string, got {type(role).__name__}")
    if role not in _ROLES:
        raise ValueError(f"unknown role {role!r}")
    return _ROLES[role]


def _content(content: Any) -> str | None:
    """The text of a `content` value: a string, `None`, or a list of text parts (joined)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError(f"'content' must be a string, a list of parts or null, got {type(content).__name__}")
    texts = []
    for number, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise ValueError(f"content part {number} is not a dict")
        if part.get("type") != "text":
            raise ValueError(f"content part {number} has unsupported type {part.get('type')!r}")
        if not isinstance(part.get("text"), str):
            raise ValueError(f"content part {number} has no string 'text'")
        texts.append(part["text"])
    return "".join(texts)


def _tool_calls(raw: Any) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"'tool_calls' must be a list, got {type(raw).__name__}")
    calls = []
    for number, call in enumerate(raw):
        where = f"tool call {number}"
        if not isinstance(call, Mapping):
            raise ValueError(f"{where} is not a dict")
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise ValueError(f"{where} has no string 'id'")
        if call.get("type", "function") != "function":
            raise ValueError(f"{where} has unsupported type {call.get('type')!r}")
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise ValueError(f"{where} has no 'function' dict")
        if not isinstance(function.get("name"), str):
            raise ValueError(f"{where} has no string function 'name'")
        if not isinstance(function.get("arguments"), str):
            raise ValueError(f"{where}: 'arguments' must be a JSON string")
        calls.append(ToolCall(call["id"], function["name"], function["arguments"]))
    return calls


def _tool_response(item: Mapping[str, Any], call_names: Mapping[str, str]) -> ToolResponse:
    call_id = item.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError("tool message without a string 'tool_call_id'")
    name = call_names.get(call_id, item.get("name") or "")
    if not isinstance(name, str):
        raise ValueError("tool message 'name' must be a string")
    return ToolResponse(call_id, name, _content(item.get("content")) or "")


def storable_text(text: str) -> str:
    """What a message text may hold: no NUL, nothing UTF-8 cannot encode (a lone surrogate); the
    text itself when it is fine. Adapters that keep a foreign message exactly elsewhere (an item,
    a field in the metadata) store this as its readable text."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="replace").decode()
    return text
