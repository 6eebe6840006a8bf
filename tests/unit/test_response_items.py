"""openai-agents items as events: plain text messages stored once, everything else as JSON
text beside a readable message; read back equal whichever parser reads them."""

from __future__ import annotations

import json

import orjson
import pytest
from sessionledger.domain import MessageType, SessionEvent, UserMessage
from sessionledger.domain.response_items import (
    ITEM_KEY,
    LONG_NUMBERS_KEY,
    SHAPE_KEY,
    TEXT_PART_KEY,
    event_item,
    item_event,
)


@pytest.mark.parametrize(
    "item",
    [
        {"role": "user", "content": "hi"},
        {"content": "hi", "role": "system"},
        {"role": "assistant", "content": ""},
    ],
)
def test_a_plain_text_message_is_stored_once_and_keeps_its_key_order(item: dict) -> None:
    event = item_event("s", item)
    assert ITEM_KEY not in event.metadata and SHAPE_KEY in event.metadata
    assert event.message.text == item["content"]
    back = event_item(event, orjson.loads)
    assert back == item and list(back) == list(item)


@pytest.mark.parametrize(
    "item",
    [
        {"role": "developer", "content": "x"},  # a role the message type cannot tell from system
        {"role": "user", "content": "x", "id": "m1"},
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "x"}, {"type": "input_text", "text": "y"}],
        },
        {"role": "user", "content": "nul\x00"},
        {"role": "user", "content": "lone \ud800 surrogate"},
    ],
)
def test_anything_else_keeps_its_exact_json_text(item: dict) -> None:
    event = item_event("s", item)
    assert event.metadata[ITEM_KEY] == json.dumps(item)
    assert event_item(event, orjson.loads) == item
    event.message.text.encode()  # the readable text is storable


@pytest.mark.parametrize(
    "item",
    [
        {"role": "user", "content": [{"type": "input_text", "text": "said once"}]},
        {
            "id": "msg_1",
            "content": [{"annotations": [], "text": "the answer", "type": "output_text", "logprobs": []}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
    ],
)
def test_the_text_of_a_one_part_message_is_stored_once(item: dict) -> None:
    event = item_event("s", item)
    assert event.metadata[TEXT_PART_KEY] is True
    text = item["content"][0]["text"]
    assert event.message.text == text and text not in event.metadata[ITEM_KEY]
    back = event_item(event, orjson.loads)
    assert back == item and list(back) == list(item) and list(back["content"][0]) == list(item["content"][0])


@pytest.mark.parametrize(
    "item",
    [
        {"role": "user", "content": [{"type": "input_text", "text": "nul\x00"}]},  # the message drops the NUL
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "x"}]},
    ],
)
def test_a_text_the_message_does_not_hold_exactly_stays_in_the_item(item: dict) -> None:
    event = item_event("s", item)
    assert TEXT_PART_KEY not in event.metadata and event.metadata[ITEM_KEY] == json.dumps(item)
    assert event_item(event, orjson.loads) == item


def test_integers_beyond_64_bits_are_read_by_the_exact_parser() -> None:
    big = {"type": "function_call_output", "call_id": "c", "output": "x", "n": 2**80, "m": -(2**70)}
    event = item_event("s", big)
    assert event.metadata[LONG_NUMBERS_KEY] is True
    assert event_item(event, orjson.loads) == big and isinstance(event_item(event, orjson.loads)["n"], int)
    small = item_event("s", {"type": "x", "n": 2**40})
    assert LONG_NUMBERS_KEY not in small.metadata


def test_readable_messages_of_calls_and_results() -> None:
    call = item_event("s", {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}).message
    assert call.type is MessageType.ASSISTANT and [(c.id, c.name) for c in call.tool_calls] == [("c1", "f")]
    result = item_event("s", {"type": "function_call_output", "call_id": "c1", "output": [{"a": 1}]}).message
    assert result.type is MessageType.TOOL and result.tool_responses[0].content == '[{"a": 1}]'
    reasoning = item_event("s", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "why"}]})
    assert reasoning.message.text == "why"


def test_an_event_the_ledger_wrote_reads_as_a_message_item() -> None:
    summary = SessionEvent(session_id="s", message=UserMessage("summary of before"))
    assert event_item(summary) == {"role": "user", "content": "summary of before"}


def test_what_is_not_a_json_object_is_refused() -> None:
    with pytest.raises(ValueError):
        item_event("s", ["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        item_event("s", {"type": "x", "value": object()})
