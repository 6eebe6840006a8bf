"""`LedgerStore`'s semantic search through the vector stores' keyed vectors, on memory, SQLite
(sqlite-vec in the ledger's file) and PostgreSQL (pgvector on the pgvector server): the vectors
follow puts, deletes and expiry; they are derived from the ledger, so a table behind, emptied or
never written is caught up and gives the same answers; one user's vectors never answer another's."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from langgraph.store.base import PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore
from sessionledger.domain.entries import Entry, Forget
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.langgraph import LedgerStore
from sessionledger.infrastructure.langgraph import store as store_module
from sessionledger.infrastructure.langgraph.store_items import ITEM_TYPE, Stored, namespace_prefix, ranked
from sessionledger.infrastructure.vectors.keyed import KeyedVectors, keyed_vectors
from sessionledger.infrastructure.vectors.schema import ExtensionMissing

DIMS = 7


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A bag of letters and a constant (never a zero vector): texts sharing letters are near."""
    vectors = []
    for text in texts:
        vector = [0.0] * (DIMS - 1) + [1.0]
        for char in text.lower():
            if char.isalpha():
                vector[ord(char) % (DIMS - 1)] += 1.0
        vectors.append(vector)
    return vectors


INDEX: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}


@pytest.fixture
def ledger(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as service:
        yield service


@pytest.fixture
def keyed(vectors_url: str) -> Iterator[KeyedVectors]:
    """The keyed vectors the tests' stores share (and the tests read), on the backend's database."""
    opened = keyed_vectors(vectors_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def user(unique: Any) -> str:
    return str(unique("user"))


def _held(keyed: KeyedVectors, user: str, prefix: tuple[str, ...] = ()) -> list[str]:
    """The keys the vector store holds for the user under `prefix`."""
    found = keyed.search(user, namespace_prefix(prefix), embed(["x"])[0], limit=1000)
    return sorted(s.key for s in found)


def _seen(found: list[SearchItem]) -> list[tuple[str, float | None]]:
    return [(i.key, None if i.score is None else round(i.score, 9)) for i in found]


def test_puts_and_deletes_reach_the_vectors_and_searches_read_them(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed)
    store.put(("docs",), "a", {"text": "apples and pears"})
    store.put(("docs", "deep"), "b", {"text": "banana bread"})
    store.put(("docs",), "c", {"text": "not indexed"}, index=False)
    assert _held(keyed, user) == ["a", "b"] and _held(keyed, user, ("docs", "deep")) == ["b"]
    assert keyed.synced(user, namespace_prefix(("docs",))) > 0

    found = store.search(("docs",), query="apple")
    assert [i.key for i in found] == ["a", "b", "c"] and found[-1].score is None
    store.put(("docs",), "a", {"text": "kiwi"}, index=False)  # now without vectors
    store.delete(("docs", "deep"), "b")
    assert _held(keyed, user) == []
    assert sorted(i.key for i in store.search(("docs",), query="apple")) == ["a", "c"]


def _brute_force(store: LedgerStore, op: SearchOp) -> list[SearchItem]:
    """What the store answered before the vector stores: `ranked` over every live item under the
    prefix, each scored with its own vectors."""
    assert op.query is not None
    everything = store.search(op.namespace_prefix, limit=100_000)
    held = [Stored(i, None, None, {"text": embed([i.value["text"]])[0]}) for i in everything]
    return ranked(op, held, embed([op.query])[0])


def test_a_page_thinned_by_a_filter_answers_as_before_and_as_in_memory_store(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    """More candidates are read until the filtered page is full (one item in seven passes) and no
    unread one can tie its last: the pages are those of the brute force over every item, and
    their scores `InMemoryStore`'s (which orders equal scores otherwise)."""
    ours = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed)
    theirs = InMemoryStore(index=INDEX)
    words = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "grape", "melon"]
    for store in (ours, theirs):
        for i in range(150):
            text = f"{words[i % 9]} {words[(i * 7) % 9]} {'z' * (i % 5)}"
            store.put(("fruit", str(i % 3)), f"k{i:03d}", {"text": text, "n": i % 7})
    for query, flt, limit, offset in [
        ("apple pie", {"n": 3}, 5, 7),
        ("zzz lime", {"n": {"$gt": 4}}, 10, 0),
        ("melon", None, 4, 140),
        ("grape", {"n": 6}, 30, 0),
        ("fig", None, 40, 20),
    ]:
        op = SearchOp(("fruit",), flt, limit, offset, query)
        mine = ours.search(("fruit",), query=query, filter=flt, limit=limit, offset=offset)
        assert _seen(mine) == _seen(_brute_force(ours, op)), (query, flt)
        peer = theirs.search(("fruit",), query=query, filter=flt, limit=limit, offset=offset)
        assert [score for _, score in _seen(mine)] == [score for _, score in _seen(peer)], (query, flt)


def test_equal_scores_past_the_first_read_are_read_too(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    """A hundred items of one text score alike; the page is the newest of them, as before, though
    the vector store lists them by key (and the newest come last)."""
    store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed)
    store.batch([PutOp(("same",), f"k{i:03d}", {"text": "apple"}) for i in range(100)])
    for i in range(100):
        store.put(("same",), f"k{i:03d}", {"text": "apple", "n": i})
    op = SearchOp(("same",), None, 3, 1, "apple")
    found = store.search(("same",), query="apple", limit=3, offset=1)
    assert _seen(found) == _seen(_brute_force(store, op))
    assert [i.key for i in found] == ["k098", "k097", "k096"]


def test_vectors_behind_or_emptied_are_caught_up_from_the_ledger(
    ledger: SessionService, keyed: KeyedVectors, user: str, vectors_url: str
) -> None:
    writer = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed)
    for key, text in [("a", "apples"), ("b", "bananas"), ("c", "cherries")]:
        writer.put(("docs",), key, {"text": text})
    expected = _seen(writer.search(("docs",), query="apple"))

    keyed.clear(user)  # a lost or restored table
    assert _held(keyed, user) == []
    assert _seen(writer.search(("docs",), query="apple")) == expected
    assert _held(keyed, user) == ["a", "b", "c"]

    # the ledger written past the vectors (an append whose vectors never came: a crash, say)
    item = writer.get(("docs",), "a")
    assert item is not None
    moved = Stored(item, None, None, {"text": embed(["zebra"])[0]})
    ledger.append_entries(writer.session_id_of(("docs",)), [Entry(ITEM_TYPE, "a", moved.payload())])
    assert writer.search(("docs",), query="zebra", limit=1)[0].key == "a"

    assert writer.rebuild_vectors() == 1
    assert _held(keyed, user) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="no index"):
        LedgerStore(service=ledger, user_id=user).rebuild_vectors()


def test_a_new_vector_store_learns_everything_from_the_ledger(
    ledger: SessionService, user: str, vectors_url: str
) -> None:
    """A store whose vectors are elsewhere (memory, here) answers as the one that wrote them."""
    writer = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=vectors_url)
    for key, text in [("a", "apples"), ("b", "bananas"), ("c", "cherries")]:
        writer.put(("docs", key), key, {"text": text})
    with LedgerStore(service=ledger, index=INDEX, user_id=user, vectors="memory://") as reader:
        assert _seen(reader.search(("docs",), query="cherry")) == _seen(
            writer.search(("docs",), query="cherry")
        )
    writer.close()


def test_one_users_vectors_never_answer_anothers_search(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    alice = LedgerStore(service=ledger, index=INDEX, user_id=f"{user}-alice", vectors=keyed)
    bob = LedgerStore(service=ledger, index=INDEX, user_id=f"{user}-bob", vectors=keyed)
    alice.put(("memories", "alice"), "secret", {"text": "the safe code is apple"})
    bob.put(("memories", "bob"), "note", {"text": "zebra"})
    assert [i.key for i in bob.search((), query="the safe code is apple")] == ["note"]
    assert [i.key for i in bob.search(("memories", "alice"), query="apple")] == []
    assert _held(keyed, f"{user}-bob") == ["note"] and _held(keyed, f"{user}-alice") == ["secret"]
    bob.rebuild_vectors()
    assert _held(keyed, f"{user}-alice") == ["secret"]

    # a namespace's session that another user made first is never read into the vectors
    carol = LedgerStore(service=ledger, index=INDEX, user_id=f"{user}-carol", vectors=keyed)
    taken = carol.session_id_of(("memories",))
    ledger.create_session(f"{user}-mallory", session_id=taken)
    planted = Stored(
        alice.get(("memories", "alice"), "secret"),  # type: ignore[arg-type]
        None,
        None,
        {"text": embed(["apple"])[0]},
    )
    ledger.append_entries(taken, [Entry(ITEM_TYPE, "planted", planted.payload())])
    carol.put(("mine",), "k", {"text": "pear"})
    assert [i.key for i in carol.search((), query="apple")] == ["k"]
    assert _held(keyed, f"{user}-carol") == ["k"]


def test_expired_items_are_left_out_and_a_sweep_removes_their_vectors(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed, ttl={"omit_expired": True})
    store.put(("t",), "short", {"text": "apple"}, ttl=0.5 / 60)
    store.put(("t",), "kept", {"text": "apricot"})
    time.sleep(0.7)
    assert _held(keyed, user) == ["kept", "short"]  # expired, not yet swept: held, not answered
    assert [i.key for i in store.search(("t",), query="apple")] == ["kept"]
    assert store.sweep_ttl() == 1
    assert _held(keyed, user) == ["kept"]


def test_an_erased_namespace_answers_nothing_and_loses_its_vectors(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed)
    store.put(("gone",), "a", {"text": "apple"})
    store.put(("kept",), "b", {"text": "apple"})
    ledger.delete_session(store.session_id_of(("gone",)))
    assert [i.key for i in store.search((), query="apple")] == ["b"]
    assert _held(keyed, user) == ["b"]


def test_a_forget_by_prefix_removes_only_the_vectors_it_matches(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    """A forget naming no keys (written to the namespace's session by its owner) is applied from
    the whole log: what it spared keeps its vectors."""
    store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed)
    for key in ("apple-1", "apple-2", "pear"):
        store.put(("fruit",), key, {"text": key})
    ledger.append_entries(store.session_id_of(("fruit",)), [Forget(ITEM_TYPE, prefix="apple")])
    assert [i.key for i in store.search(("fruit",), query="apple")] == ["pear"]
    assert _held(keyed, user) == ["pear"]


def test_the_async_face_writes_and_searches_the_same_vectors(
    ledger: SessionService, keyed: KeyedVectors, user: str
) -> None:
    store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=keyed)

    async def story() -> list[Any]:
        await store.aput(("a",), "k", {"text": "apple"})
        await store.aput(("a",), "j", {"text": "zebra"})
        found = await store.asearch(("a",), query="apples", limit=1)
        await store.adelete(("a",), "k")
        return [[i.key for i in found], _held(keyed, user)]

    assert asyncio.run(story()) == [["k"], ["j"]]


def test_vectors_without_an_index_or_pgvector_are_one_line_errors(
    ledger: SessionService, pg_url: str
) -> None:
    with pytest.raises(ValueError, match="give index= too"):
        LedgerStore(service=ledger, vectors="memory://")
    with (
        open_service(pg_url) as on_postgres,
        pytest.raises(ExtensionMissing, match="vectors='memory://'") as raised,
        LedgerStore(service=on_postgres, index=INDEX),
    ):
        pass
    assert "\n" not in str(raised.value)


@dataclass
class VectorOpens:
    """The keyed vectors stores opened (`keyed_vectors`), in order, with the threads that opened
    them, and those closed since."""

    opened: list[KeyedVectors] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    closed: list[KeyedVectors] = field(default_factory=list)


@pytest.fixture
def vector_opens(monkeypatch: pytest.MonkeyPatch) -> VectorOpens:
    opens = VectorOpens()
    opening = store_module.keyed_vectors

    def recorded(url: str) -> KeyedVectors:
        vectors = opening(url)
        close = vectors.close

        def closing() -> None:
            opens.closed.append(vectors)
            close()

        vectors.close = closing  # type: ignore[method-assign]
        opens.opened.append(vectors)
        opens.threads.append(threading.get_ident())
        return vectors

    monkeypatch.setattr(store_module, "keyed_vectors", recorded)
    return opens


def test_a_store_closes_the_vectors_it_opened_each_time_it_is_closed(
    ledger: SessionService, user: str, vectors_url: str, vector_opens: VectorOpens
) -> None:
    """A store on a given service outlives its `close()`: used again, it opens its vectors again,
    and the next close closes those too."""
    opened, closed = vector_opens.opened, vector_opens.closed
    store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=vectors_url)
    for text in ("apples", "bananas"):
        store.put(("docs",), text, {"text": text})
        store.close()
        assert closed == opened and len(opened) == 1 + (text == "bananas")
    store.close()
    assert closed == opened
    assert [i.key for i in store.search(("docs",), query="bananas", limit=1)] == ["bananas"]
    store.close()
    assert closed == opened and len(opened) == 3


def test_a_store_opens_its_vectors_with_its_ledger_and_never_on_the_event_loop(
    ledger: SessionService, user: str, vectors_url: str, vector_opens: VectorOpens
) -> None:
    """The index's vectors open at `with`, `async with` or the first call that needs them, as the
    ledger does: the constructor opened them, and an async handler that made a store per request
    had its loop blocked while pgvector connected and checked its schema."""
    opened_on = vector_opens.threads
    LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=vectors_url).close()
    assert opened_on == []
    with LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=vectors_url) as store:
        assert len(opened_on) == 1
        store.put(("docs",), "a", {"text": "apples"})
    assert len(opened_on) == 1

    async def handler() -> int:
        async with LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=vectors_url) as store:
            assert len(opened_on) == 2
            await store.aput(("docs",), "b", {"text": "bananas"})
        store = LedgerStore(service=ledger, index=INDEX, user_id=user, vectors=vectors_url)
        try:
            assert [i.key for i in await store.asearch(("docs",), query="apples", limit=1)] == ["a"]
        finally:
            await store.aclose()
        return threading.get_ident()

    loop_thread = asyncio.run(handler())
    assert len(opened_on) == 3 and loop_thread not in opened_on[1:]  # the first, `with`, is ours
