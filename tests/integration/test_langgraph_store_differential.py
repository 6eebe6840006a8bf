"""The same random operation sequences against langgraph's own `InMemoryStore` and `PostgresStore`
and against `LedgerStore` (memory, SQLite, PostgreSQL) give the same results.

Compared: every `get` (namespace, key, value; timestamps loosely: aware, created before updated),
every `list_namespaces`, and every `search`, in order against `PostgresStore` (newest update
first, as its SQL orders; `InMemoryStore` keeps insertion order instead) and as a set against
both peers when the search's page holds everything. The sequences keep out what the two peers
themselves answer differently: filters on a key an item lacks, and order operators on anything
but one-digit numbers (`PostgresStore` compares their text). Puts of one batch go to one key
(the peers' order between items updated in one transaction is undefined). `list_namespaces` is
compared with `PostgresStore` alone: `InMemoryStore` also lists a namespace once merely read, or
emptied by deletes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, Op, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.langgraph import LedgerStore

from tests.conftest import _pg_database

NAMESPACES = [
    ("docs",),
    ("docs", "a"),
    ("docs", "a", "b"),
    ("docs", "ab"),
    ("memories", "alice"),
    ("memories", "bob"),
    ("user_1",),
    ("userX1", "n%"),
]
KEYS = ["k1", "k2", "k.3", "k_%", "K1"]
PREFIXES = [
    (),
    (),
    ("docs",),
    ("docs",),
    ("docs", "a"),
    ("memories",),
    ("user_1",),
    ("userX1",),
    ("nowhere",),
]
MATCHES = [None, ("docs",), ("memories",), ("docs", "*"), ("*", "a"), ("user_1",)]
SUFFIXES = [None, ("a",), ("alice",), ("b",), ("n%",)]

values = st.fixed_dictionaries(
    {"n": st.integers(0, 9), "tag": st.sampled_from(["a", "b", "c"])},
    optional={
        "nested": st.fixed_dictionaries({"x": st.integers(0, 2)}),
        "text": st.text(st.characters(codec="utf-8", blacklist_characters="\x00"), max_size=5),
    },
)
filters = st.one_of(
    st.none(),
    st.none(),
    st.builds(lambda t: {"tag": t}, st.sampled_from(["a", "b", "c"])),
    st.builds(lambda n: {"n": n}, st.integers(0, 9)),
    st.builds(
        lambda op, n: {"n": {op: n}},
        st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"]),
        st.integers(0, 9),
    ),
    st.builds(lambda n, t: {"n": {"$gte": n}, "tag": t}, st.integers(0, 9), st.sampled_from(["a", "b"])),
)
puts = st.builds(lambda ns, k, v: PutOp(ns, k, v), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), values)
deletes = st.builds(lambda ns, k: PutOp(ns, k, None), st.sampled_from(NAMESPACES), st.sampled_from(KEYS))
gets = st.builds(lambda ns, k: GetOp(ns, k), st.sampled_from(NAMESPACES), st.sampled_from(KEYS))
searches = st.builds(
    lambda prefix, flt, limit, offset: SearchOp(prefix, flt, limit, offset),
    st.sampled_from(PREFIXES),
    filters,
    st.integers(1, 6),
    st.integers(0, 3),
)


def _listing(prefix: Any, suffix: Any, depth: int | None, limit: int, offset: int) -> ListNamespacesOp:
    conditions = []
    if prefix:
        conditions.append(MatchCondition("prefix", prefix))
    if suffix:
        conditions.append(MatchCondition("suffix", suffix))
    return ListNamespacesOp(tuple(conditions), depth, limit, offset)


listings = st.builds(
    _listing,
    st.sampled_from(MATCHES),
    st.sampled_from(SUFFIXES),
    st.sampled_from([None, 1, 2, 3]),
    st.integers(1, 10),
    st.integers(0, 2),
)


@st.composite
def batches(draw: st.DrawFn) -> list[Op]:
    """A batch of reads and puts of one key (the last of them wins)."""
    ns, key = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(KEYS))
    writes = draw(st.lists(st.one_of(values, st.none()), min_size=1, max_size=3))
    reads = draw(st.lists(st.one_of(gets, searches, listings, st.just(GetOp(ns, key))), max_size=3))
    ops: list[Op] = [PutOp(ns, key, value) for value in writes] + reads
    return draw(st.permutations(ops))


@dataclass(frozen=True)
class Batch:
    """Ops sent in one `batch` call (a step of a sequence is otherwise one op)."""

    ops: list[Op]


steps = st.builds(
    lambda first, then: first + then,
    st.lists(puts, min_size=3, max_size=12),
    st.lists(
        st.one_of(puts, deletes, gets, searches, searches, searches, listings, st.builds(Batch, batches())),
        min_size=5,
        max_size=30,
    ),
)
"""Some puts first (so that searches have pages to order and cut), then anything."""


def embed(texts: list[str]) -> list[list[float]]:
    """A bag of letters and a constant (never a zero vector): texts sharing letters are near."""
    vectors = []
    for text in texts:
        vector = [0.0] * 6 + [1.0]
        for char in text.lower():
            if char.isalpha():
                vector[ord(char) % 6] += 1.0
        vectors.append(vector)
    return vectors


INDEX: Any = {"dims": 7, "embed": embed, "fields": ["text"]}
"""Items with a `text` are scored; the others fill a short page after them, as in `InMemoryStore`."""


@dataclass(frozen=True)
class Query:
    """A search with a query (a step of its own: `PostgresStore` has no index to answer it)."""

    op: SearchOp


queries = st.builds(
    lambda prefix, flt, limit, offset, text: Query(SearchOp(prefix, flt, limit, offset, text)),
    st.sampled_from(PREFIXES),
    filters,
    st.integers(1, 6),
    st.integers(0, 3),
    st.sampled_from(["a", "ab", "xyz", "hello", "Zz"]),
)
indexed_steps = st.builds(
    lambda first, then: first + then,
    st.lists(puts, min_size=3, max_size=12),
    st.lists(
        st.one_of(puts, deletes, gets, searches, queries, queries, listings, st.builds(Batch, batches())),
        min_size=5,
        max_size=30,
    ),
)
"""`steps` with searches by query among them."""


@pytest.fixture(scope="module")
def peer_postgres() -> Iterator[PostgresStore]:
    """langgraph's `PostgresStore` on a fresh database of its own, dropped afterwards."""
    for url in _pg_database():
        with PostgresStore.from_conn_string(
            url.replace("postgresql+psycopg://", "postgresql://", 1)
        ) as store:
            store.setup()
            yield store


@pytest.fixture
def ledger_service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as service:
        yield service


def _emptied(store: PostgresStore) -> PostgresStore:
    with store._cursor() as cursor:
        cursor.execute("TRUNCATE store")
    return store


def _seen(item: Item | None) -> Any:
    if item is None:
        return None
    assert item.created_at.tzinfo is not None and item.created_at <= item.updated_at
    return (item.namespace, item.key, item.value)


def _answers(store: BaseStore, ops: list[Op]) -> list[Any]:
    answers = []
    for op, result in zip(ops, store.batch(ops), strict=True):
        if isinstance(op, GetOp):
            answers.append(_seen(result))
        elif isinstance(op, SearchOp):
            answers.append([_seen(item) for item in result])
        else:
            answers.append(result)
    return answers


def _everything(store: BaseStore, op: SearchOp) -> list[Any]:
    found = store.search(op.namespace_prefix, filter=op.filter, limit=1000)
    return sorted(json.dumps(_seen(item), sort_keys=True) for item in found)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=steps)
def test_ledger_store_answers_as_langgraphs_stores(
    sequence: list[Any], ledger_service: SessionService, peer_postgres: PostgresStore
) -> None:
    memory = InMemoryStore()
    postgres = _emptied(peer_postgres)
    ours = LedgerStore(service=ledger_service, user_id=f"u-{uuid.uuid4().hex[:8]}")
    for step in sequence:
        ops = step.ops if isinstance(step, Batch) else [step]
        expected = _answers(postgres, ops)
        assert _answers(ours, ops) == expected, ops
        by_memory = _answers(memory, ops)
        for op, mine, theirs in zip(ops, expected, by_memory, strict=True):
            if isinstance(op, SearchOp):
                assert _everything(ours, op) == _everything(memory, op), op
            elif isinstance(op, GetOp):
                assert mine == theirs, op


def _texted(step: Any) -> Any:
    """The step with a `text` in every value it puts: `InMemoryStore` keeps an item's old vectors
    when a put gives it nothing to index (the item stays scored by its old text; here it has no
    vectors any more), so only items that always have a text are compared by score."""
    if isinstance(step, Batch):
        return Batch([_texted(op) for op in step.ops])
    if isinstance(step, PutOp) and step.value is not None and "text" not in step.value:
        return PutOp(step.namespace, step.key, {**step.value, "text": ""})
    return step


def _scored(store: BaseStore, op: SearchOp) -> list[tuple[Any, float | None]]:
    found = store.batch([op])[0]
    assert isinstance(found, list)
    return [(_seen(item), None if item.score is None else round(item.score, 9)) for item in found]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=indexed_steps)
def test_with_an_index_ledger_store_answers_as_langgraphs_stores(
    sequence: list[Any], ledger_service: SessionService, vectors_url: str, peer_postgres: PostgresStore
) -> None:
    """The same with an index, its candidates from the vector store of the backend: every other
    op as before; a search by query gives `InMemoryStore`'s scores in its order (items of equal
    score may come in another order: the newest first here) and, when its page holds everything,
    the same items."""
    sequence = [_texted(step) for step in sequence]
    memory = InMemoryStore(index=INDEX)
    postgres = _emptied(peer_postgres)
    with LedgerStore(
        service=ledger_service, index=INDEX, user_id=f"u-{uuid.uuid4().hex[:8]}", vectors=vectors_url
    ) as ours:
        for step in sequence:
            if isinstance(step, Query):
                mine, theirs = _scored(ours, step.op), _scored(memory, step.op)
                assert [score for _, score in mine] == [score for _, score in theirs], step
                whole = SearchOp(step.op.namespace_prefix, step.op.filter, 1000, 0, step.op.query)
                everything = [
                    sorted(json.dumps(pair, sort_keys=True) for pair in _scored(store, whole))
                    for store in (ours, memory)
                ]
                assert everything[0] == everything[1], step
                continue
            ops = step.ops if isinstance(step, Batch) else [step]
            expected = _answers(postgres, ops)
            assert _answers(ours, ops) == expected, ops
            by_memory = _answers(memory, ops)
            for op, mine_, theirs_ in zip(ops, expected, by_memory, strict=True):
                if isinstance(op, GetOp):
                    assert mine_ == theirs_, op
