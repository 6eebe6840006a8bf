"""Fuzzing the entry points of issue 25: whatever comes in, the answer is a value or a `ValueError`
(an `Error:` string from the recall tools), never a `TypeError`, `OverflowError` or
`RecursionError` from deep inside."""

from __future__ import annotations

import contextlib
import math
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st
from sessionledger.domain import EventFilter
from sessionledger.domain.messages import from_openai
from sessionledger.domain.times import in_utc
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.agents import RecallTools
from sessionledger.infrastructure.vectors.entries import embedded

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ROLES = st.sampled_from(["user", "assistant", "system", "tool", "developer"]) | JSON
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES},
    optional={"content": JSON, "tool_calls": JSON, "tool_call_id": JSON, "name": JSON},
)
OFFSETS = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
MOMENTS = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=OFFSETS
)


@given(st.lists(MESSAGE | JSON, max_size=4))
def test_from_openai_takes_any_json_or_says_what_is_wrong(dicts: list[object]) -> None:
    with contextlib.suppress(ValueError):
        from_openai(dicts)  # type: ignore[arg-type]  # anything at all, on purpose


@given(MOMENTS)
def test_any_aware_time_is_utc_or_a_value_error_naming_it(moment: datetime) -> None:
    try:
        utc = in_utc(moment, "start")
    except ValueError as error:
        assert f"start {moment.isoformat()} is out of range" in str(error)
        try:
            EventFilter(start=moment)
        except ValueError:
            return
        raise AssertionError("a filter took a time UTC has no room for") from None
    assert utc == moment and utc.tzinfo is UTC
    assert EventFilter(start=moment, end=moment).start == moment


@given(st.one_of(JSON, st.lists(st.lists(JSON, max_size=3) | JSON, max_size=3)))
def test_any_embedder_answer_is_vectors_or_a_value_error(answer: object) -> None:
    class Embedder:
        def embed(self, texts):
            return answer

    try:
        vectors = embedded(Embedder(), ["one"])
    except ValueError:
        return
    assert (
        len(vectors) == 1
        and vectors[0]
        and all(isinstance(x, float) and math.isfinite(x) for x in vectors[0])
    )


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["conversation_search", "cross_session_search"]),
    st.one_of(
        JSON.map(str),
        st.text(max_size=40),
        st.integers(min_value=0, max_value=20_000).map(lambda n: "[" * n),
        st.builds(lambda since: f'{{"query": "x", "since": "{since}"}}', MOMENTS.map(datetime.isoformat)),
    ),
)
def test_the_recall_tools_answer_any_arguments_with_a_string(name: str, arguments: str) -> None:
    answer = TOOLS.handle(name, arguments, session_id=SESSION, user_id="u")
    assert isinstance(answer, str)


SERVICE = open_service("memory://")
"""One in-memory ledger for every example (hypothesis runs a test body many times)."""
SESSION = SERVICE.create_session("u").id
TOOLS = RecallTools(SERVICE)
