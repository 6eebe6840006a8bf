"""What the offline model answers: scripted replies as OpenAI wire JSON, derived replies, embeddings."""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

EMBEDDING_DIMENSIONS = 64
MAX_DERIVED_CHARS = 200


def embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector, a hashed bag of words: each lowercase word adds +-1 at a slot
    its hash picks, so texts that share words are close (what a recall test or demo needs)."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dimensions] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


class ToolCall(NamedTuple):
    """One tool call of a scripted reply; `arguments` is the JSON text the model would produce."""

    id: str
    name: str
    arguments: str


def tool_call(name: str, arguments: Mapping[str, Any] | str = "{}", *, id: str | None = None) -> ToolCall:
    """A tool call to script; the id defaults to one derived from the call, so runs are repeatable."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCall(id or "call_" + hashlib.sha256(f"{name}\0{text}".encode()).hexdigest()[:12], name, text)


@dataclass(frozen=True)
class Reply:
    """One assistant answer; build it with `Reply.text`, `Reply.json` or `Reply.calling`."""

    content: str | None = None
    refusal: str | None = None
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    finish_reason: str = "stop"

    @classmethod
    def text(cls, content: str) -> Reply:
        return cls(content=content)

    @classmethod
    def json(cls, data: Any) -> Reply:
        return cls(content=json.dumps(data))

    @classmethod
    def calling(cls, *calls: tuple[str, str, str], content: str | None = None) -> Reply:
        """A reply asking for tool calls, each a `tool_call(...)` (or an `(id, name, arguments)` tuple)."""
        return cls(
            content=content, tool_calls=tuple(ToolCall(*call) for call in calls), finish_reason="tool_calls"
        )

    def completion(self, model: str) -> dict[str, Any]:
        """The reply as a `chat.completion` object."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content, "refusal": self.refusal}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
                for id, name, arguments in self.tool_calls
            ]
        return {
            **_envelope("chat.completion", model),
            "choices": [
                {"index": 0, "message": message, "finish_reason": self.finish_reason, "logprobs": None}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def chunks(self, model: str) -> list[dict[str, Any]]:
        """The reply as `chat.completion.chunk` objects: the role, the text in pieces, each tool call
        (its head, then its arguments in two halves), the finish."""
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        text = self.content or ""
        deltas += [{"content": text[i : i + 4]} for i in range(0, len(text), 4)]
        for index, (id, name, arguments) in enumerate(self.tool_calls):
            head = {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
            deltas.append({"tool_calls": [head]})
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        events: list[dict[str, Any]] = [{"delta": delta, "finish_reason": None} for delta in deltas]
        events.append({"delta": {}, "finish_reason": self.finish_reason})
        envelope = _envelope("chat.completion.chunk", model)
        return [{**envelope, "choices": [{"index": 0, "logprobs": None, **event}]} for event in events]


def script_from_json(data: Any) -> list[Reply]:
    """A script written as JSON (`sessionledger fake-llm --script FILE`): a list whose items are a
    string (a text reply) or an object with `content` and/or `tool_calls`, each `{"name", "arguments"
    (an object or JSON text), "id" (optional)}`. Anything else is a `ValueError` naming the item."""
    if not isinstance(data, list):
        raise ValueError("a script is a JSON list of replies")
    return [_reply_from_json(item, number) for number, item in enumerate(data, start=1)]


def _reply_from_json(item: Any, number: int) -> Reply:
    if isinstance(item, str):
        return Reply.text(item)
    if isinstance(item, dict) and not set(item) - {"content", "tool_calls"}:
        content, calls = item.get("content"), item.get("tool_calls", [])
        if (
            (content is None or isinstance(content, str))
            and isinstance(calls, list)
            and all(_is_call(call) for call in calls)
            and (calls or content is not None)
        ):
            if not calls:
                return Reply(content=content)
            made = (tool_call(call["name"], call.get("arguments", "{}"), id=call.get("id")) for call in calls)
            return Reply.calling(*made, content=content)
    raise ValueError(
        f"reply {number} of the script is not a string or an object with content and/or tool_calls "
        '([{"name": ..., "arguments": {...}}])'
    )


def _is_call(call: Any) -> bool:
    return (
        isinstance(call, dict)
        and not set(call) - {"name", "arguments", "id"}
        and isinstance(call.get("name"), str)
        and isinstance(call.get("arguments", "{}"), str | dict)
        and isinstance(call.get("id", ""), str)
    )


def _envelope(kind: str, model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-offline", "object": kind, "created": int(time.time()), "model": model}


def server_sent_events(chunks: list[dict[str, Any]]) -> list[bytes]:
    """Chunks as the `data: ...` events of a stream, closed by `data: [DONE]`."""
    return [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks] + [b"data: [DONE]\n\n"]


def derived_reply(request: Mapping[str, Any]) -> Reply:
    """The unscripted answer to a chat-completions request: a short text taken from the conversation
    (the user's lines for a summarization prompt, else the last message), as JSON when the request's
    `response_format` asks for it (an object that fits a `json_schema`, so structured output parses)."""
    text = _derived_text(request.get("messages") or [])
    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return Reply.json(_instance((response_format.get("json_schema") or {}).get("schema") or {}, text))
    if response_format.get("type") == "json_object":
        return Reply.json({"reply": text})
    return Reply.text(text)


def _derived_text(messages: list[Mapping[str, Any]]) -> str:
    texts = [(str(m.get("role")), _content_text(m.get("content"))) for m in messages]
    if any("summar" in text.lower() for role, text in texts if role in ("system", "developer")):
        said = [
            line.split(":", 1)[1].strip()
            for _, text in texts
            for line in text.splitlines()
            if line.lower().startswith("user:")
        ]
        if said:
            return _short("The user said: " + "; ".join(said) + ".")
    if not texts:
        return "Hello from the offline model."
    role, last = texts[-1]
    if role == "tool":
        return _short(f"The tool answered: {last}")
    return _short(f"You said: {last}" if last else "Go on.")


def _content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DERIVED_CHARS else text[: MAX_DERIVED_CHARS - 1].rstrip() + "…"


def _instance(schema: Mapping[str, Any], text: str) -> Any:
    """A value that fits a JSON schema's common keywords, its strings `text`."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if "anyOf" in schema:
        return _instance(schema["anyOf"][0], text)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _instance(sub, text) for name, sub in properties.items()}
    if kind == "array":
        return [_instance(schema.get("items") or {}, text)] * max(1, int(schema.get("minItems", 1)))
    if kind in ("number", "integer"):
        low, high = schema.get("minimum"), schema.get("maximum")
        value = (low + high) / 2 if low is not None and high is not None else low if low is not None else 0
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return text
