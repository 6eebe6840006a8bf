"""One contract suite for the keyed vector API (`vectors.keyed.KeyedVectors`) against every backend:
in memory, sqlite-vec on a SQLite file, pgvector on a real PostgreSQL with the extension (a fresh
database per test, dropped after it)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from sessionledger.infrastructure.vectors.keyed import KeyedChange, KeyedVectors, Scored, keyed_vectors
from sessionledger.infrastructure.vectors.keyed_memory import InMemoryKeyedVectors
from sessionledger.infrastructure.vectors.pgvector import PgKeyedVectors
from sessionledger.infrastructure.vectors.sqlite_vec import SqliteKeyedVectors


@pytest.fixture(params=["memory", "sqlite-vec", "pgvector"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite-vec":
        return f"sqlite:///{tmp_path / 'vectors.db'}"
    return str(request.getfixturevalue("pgvector_database"))


@pytest.fixture
def vectors(url: str) -> Iterator[KeyedVectors]:
    store = keyed_vectors(url)
    try:
        yield store
    finally:
        store.close()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm


def change(key: str, position: int, **fields: list[float]) -> KeyedChange:
    return KeyedChange(key, position, fields)


def keys(found: list[Scored]) -> list[tuple[str, str]]:
    return [(s.namespace, s.key) for s in found]


def test_each_url_gets_its_backend(url: str, vectors: KeyedVectors) -> None:
    expected = {"memory": InMemoryKeyedVectors, "sqlite": SqliteKeyedVectors, "postgresql": PgKeyedVectors}
    assert type(vectors) is next(cls for prefix, cls in expected.items() if url.startswith(prefix))


def test_scores_are_cosine_similarities_best_field_first(vectors: KeyedVectors) -> None:
    rng = random.Random(3)
    stored = {f"k{i}": [rng.uniform(-1, 1) for _ in range(8)] for i in range(20)}
    second = [rng.uniform(-1, 1) for _ in range(8)]
    vectors.write(
        "ada",
        "docs.",
        [change(k, 1, text=v) for k, v in stored.items()] + [change("two", 1, a=stored["k0"], b=second)],
        through=1,
    )
    query = [rng.uniform(-1, 1) for _ in range(8)]
    found = vectors.search("ada", "", query, limit=100)
    expected = {k: cosine(query, v) for k, v in stored.items()}
    expected["two"] = max(cosine(query, stored["k0"]), cosine(query, second))
    assert [s.key for s in found] == sorted(expected, key=lambda k: -expected[k])
    for s in found:  # float32 in the SQL backends
        assert s.namespace == "docs." and s.score == pytest.approx(expected[s.key], abs=1e-6)


def test_limit_and_offset_page_through_the_order(vectors: KeyedVectors) -> None:
    vectors.write("ada", "n.", [change(f"k{i}", 1, f=[1.0, i / 10]) for i in range(10)], through=1)
    whole = keys(vectors.search("ada", "", [1.0, 0.0], limit=10))
    assert [k for _, k in whole] == [f"k{i}" for i in range(10)]
    assert keys(vectors.search("ada", "", [1.0, 0.0], limit=3, offset=4)) == whole[4:7]
    assert vectors.search("ada", "", [1.0, 0.0], limit=3, offset=10) == []


def test_a_prefix_keeps_to_the_namespaces_below_it(vectors: KeyedVectors) -> None:
    for namespace in ("a.", "a.b.", "ab.", "b.a."):
        vectors.write("ada", namespace, [change("k", 1, f=[1.0, 0.0])], through=1)
    assert sorted(n for n, _ in keys(vectors.search("ada", "a.", [1.0, 0.0], limit=10))) == ["a.", "a.b."]
    assert len(vectors.search("ada", "", [1.0, 0.0], limit=10)) == 4
    assert vectors.search("ada", "c.", [1.0, 0.0], limit=10) == []


def test_one_owners_vectors_never_answer_anothers_search(vectors: KeyedVectors) -> None:
    vectors.write("alice", "memories.", [change("secret", 1, f=[1.0, 2.0])], through=1)
    assert vectors.search("bob", "", [1.0, 2.0], limit=10) == []
    assert vectors.synced("bob", "memories.") == 0
    vectors.write("bob", "memories.", [change("secret", 2)], through=2)  # bob deleting his own key
    vectors.clear("bob")
    assert keys(vectors.search("alice", "", [1.0, 2.0], limit=10)) == [("memories.", "secret")]
    assert vectors.synced("alice", "memories.") == 1


def test_a_change_replaces_a_keys_fields_and_an_empty_one_deletes_it(vectors: KeyedVectors) -> None:
    vectors.write(
        "ada", "n.", [change("k", 1, a=[1.0, 0.0], b=[0.0, 1.0]), change("j", 1, a=[1.0, 1.0])], through=1
    )
    vectors.write("ada", "n.", [change("k", 2, c=[1.0, -1.0])], through=2)
    (found,) = [s for s in vectors.search("ada", "", [0.0, 1.0], limit=10) if s.key == "k"]
    assert found.score == pytest.approx(cosine([0.0, 1.0], [1.0, -1.0]), abs=1e-6)  # b is gone
    vectors.write("ada", "n.", [change("k", 3)], through=3)
    assert keys(vectors.search("ada", "", [0.0, 1.0], limit=10)) == [("n.", "j")]


def test_an_older_change_arriving_late_changes_nothing(vectors: KeyedVectors) -> None:
    vectors.write("ada", "n.", [change("k", 5, a=[1.0, 0.0])], through=5)
    vectors.write("ada", "n.", [change("k", 3, a=[0.0, 1.0], b=[0.0, 1.0]), change("gone", 4)], through=4)
    (found,) = vectors.search("ada", "", [1.0, 0.0], limit=10)
    assert found.key == "k" and found.score == pytest.approx(1.0)
    vectors.write("ada", "n.", [change("k", 4)], through=4)  # an older delete
    assert len(vectors.search("ada", "", [1.0, 0.0], limit=10)) == 1


def test_marks_only_move_forward_and_a_clear_drops_the_erased(vectors: KeyedVectors) -> None:
    assert vectors.synced("ada", "n.") == 0
    vectors.write("ada", "n.", [change("old", 2, a=[1.0, 0.0])], through=7)
    vectors.write("ada", "n.", [], through=3)
    assert vectors.synced("ada", "n.") == 7
    vectors.write("ada", "n.", [change("new", 9, a=[1.0, 0.0])], through=9, cleared_before=8)
    assert keys(vectors.search("ada", "", [1.0, 0.0], limit=10)) == [("n.", "new")]
    vectors.clear("ada")
    assert vectors.synced("ada", "n.") == 0 and vectors.search("ada", "", [1.0, 0.0], limit=10) == []


def test_a_search_compares_only_vectors_of_its_dimension(vectors: KeyedVectors) -> None:
    vectors.write(
        "ada", "n.", [change("two", 1, a=[1.0, 0.0]), change("three", 1, a=[1.0, 0.0, 0.0])], through=1
    )
    assert keys(vectors.search("ada", "", [0.5, 0.5, 0.0], limit=10)) == [("n.", "three")]


def test_the_sql_backends_keep_their_vectors_when_reopened(url: str, vectors: KeyedVectors) -> None:
    if url == "memory://":
        pytest.skip("the memory backend lives as long as its object")
    vectors.write("ada", "n.", [change("k", 4, a=[1.0, 0.0])], through=4)
    with keyed_vectors(url) as again:  # type: ignore[attr-defined]
        assert again.synced("ada", "n.") == 4
        assert keys(again.search("ada", "", [1.0, 0.0], limit=1)) == [("n.", "k")]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda v: v.write("", "n.", [], through=1), "user_id"),
        (lambda v: v.write("ada", "n.", [("k", 1, {})], through=1), "KeyedChange"),
        (lambda v: v.write("ada", "n.", [change("k", 1, a=[1.0, math.nan])], through=2), "finite"),
        (lambda v: v.write("ada", "n.", [change("k", 1, a=[])], through=2), "finite"),
        (lambda v: v.write("ada", "n.", [KeyedChange("k", -1, {})], through=2), "position"),
        (lambda v: v.write("ada", "n\x00", [], through=2), "namespace"),
        (lambda v: v.write("ada", "n.", [], through=True), "through"),
        (lambda v: v.search("ada", "", [1.0], limit=0), "limit"),
        (lambda v: v.search("ada", "", [1.0], limit=2**63), "limit"),
        (lambda v: v.search("ada", "", [1.0], limit=1, offset=-1), "offset"),
        (lambda v: v.search("ada", "", "abc", limit=1), "query vector"),
    ],
)
def test_bad_arguments_are_one_line_errors_and_change_nothing(
    vectors: KeyedVectors, call: Any, message: str
) -> None:
    vectors.write("ada", "n.", [change("k", 1, a=[1.0, 0.0])], through=1)
    with pytest.raises(ValueError, match=message) as raised:
        call(vectors)
    assert "\n" not in str(raised.value)
    assert keys(vectors.search("ada", "", [1.0, 0.0], limit=10)) == [("n.", "k")]
    assert vectors.synced("ada", "n.") == 1


def test_a_zero_vector_scores_0_and_breaks_no_search(vectors: KeyedVectors) -> None:
    """A zero vector has no cosine: its similarity is 0 on every backend (sqlite-vec says NULL)."""
    vectors.write(
        "ada",
        "n.",
        [change("zero", 1, f=[0, 0]), change("same", 2, f=[1, 0]), change("opposite", 3, f=[-1, 0])],
        through=3,
    )
    found = vectors.search("ada", "", [1, 0], limit=5)
    assert [(s.key, round(s.score, 6)) for s in found] == [("same", 1.0), ("zero", 0.0), ("opposite", -1.0)]
    assert [(s.key, s.score) for s in vectors.search("ada", "", [0, 0], limit=5)] == [
        ("opposite", 0.0),
        ("same", 0.0),
        ("zero", 0.0),
    ]
