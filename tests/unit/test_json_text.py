"""JSON from outside is read with its nesting bounded (domain/json_text.py): nested too deeply is
malformed JSON, a `ValueError`, never a `RecursionError` (issue 25)."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sessionledger.domain.json_text import NestedTooDeeply, read_json


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000, ("[" * 100_000 + "]" * 100_000).encode()])
def test_nesting_deeper_than_the_parser_goes_is_malformed_json(text: str | bytes) -> None:
    with pytest.raises(json.JSONDecodeError, match="nested too deeply") as refused:
        read_json(text)
    assert isinstance(refused.value, NestedTooDeeply) and isinstance(refused.value, ValueError)


def test_what_the_parser_reads_is_read_as_before() -> None:
    text = '{"big": 123456789012345678901234567890, "f": 1e400, "s": "\\ud800", "n": [[[[1]]]]}'
    assert read_json(text) == json.loads(text)
    assert read_json("[" * 200 + "]" * 200) == json.loads("[" * 200 + "]" * 200)


@given(st.lists(st.sampled_from(["[", "]", "{", "}", '"a":', "1", ",", '"', " "]), max_size=3000))
def test_any_text_is_a_value_or_a_value_error(pieces: list[str]) -> None:
    with contextlib.suppress(ValueError):  # anything else (RecursionError) fails the test
        read_json("".join(pieces))


@given(st.integers(min_value=1, max_value=5000), st.sampled_from(["[", '{"k":']))
def test_any_depth_is_a_value_or_a_value_error(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    text = opener * depth + "0" + closer * depth
    try:
        value = read_json(text)
    except NestedTooDeeply:
        return
    assert value == json.loads(text)
