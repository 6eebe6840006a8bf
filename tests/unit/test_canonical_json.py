"""`canonical` writes, with orjson when it can, exactly the text the `json` encoder writes: every
stored content hash was computed over that text."""

from __future__ import annotations

import json
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessionledger.domain.hashing import FLOAT_SEARCH_LIMIT, canonical
from sessionledger.domain.mappings import FrozenDict

REFERENCE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Color(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


def reference(value: Any) -> str | None:
    """The `json` encoder's text, or `None` when it refuses the value."""
    try:
        return REFERENCE.encode(value)
    except (TypeError, ValueError):
        return None


def ours(value: Any) -> str | None:
    try:
        return canonical(value)
    except ValueError:
        return None


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec=None, categories=None), max_size=30),  # control chars, surrogates
    st.sampled_from([Color.RED, Level.HIGH, "\u2028\u2029\ufeff\x7f\x00", '😀 é \\ " /']),
)
keys = st.one_of(st.text(max_size=8), st.integers(-3, 3))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(st.text(max_size=8), inner, max_size=4).map(FrozenDict),
    ),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(values)
def test_the_same_text_as_the_json_encoder(value: Any) -> None:
    assert ours(value) == reference(value)


@pytest.mark.parametrize(
    "value",
    [1e16, 1e-7, 0.1, -0.0, [1.5e300], {"a": {"b": [2.0]}}, float("nan"), 2**64, {1: "x"}, {"\ud800": 1}],
)
def test_floats_and_what_orjson_refuses_are_written_by_json(value: Any) -> None:
    assert ours(value) == reference(value)


def test_a_value_that_contains_itself_is_refused() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="not JSON-serializable"):
        canonical(looped)


def test_other_types_are_refused() -> None:
    with pytest.raises(ValueError, match="not JSON-serializable"):
        canonical({"when": object()})


def test_a_value_too_large_to_search_for_floats_is_written_by_json() -> None:
    value = {"n": [*range(FLOAT_SEARCH_LIMIT), 1e-7]}
    assert canonical(value) == REFERENCE.encode(value)
