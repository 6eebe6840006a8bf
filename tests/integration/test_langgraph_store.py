"""`LedgerStore` on memory, SQLite and PostgreSQL: isolation between users, stores that share a
database, the audit trail of puts and deletes, semantic search against `InMemoryStore`, TTL against
`PostgresStore`, and the asynchronous methods. (Random sequences against both peers:
test_langgraph_store_differential.py.)"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, Item, PutOp, TTLConfig
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from sessionledger.domain.entries import Entry
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import SessionService, open_async_service, open_service
from sessionledger.infrastructure.audit.verify import verify
from sessionledger.infrastructure.langgraph import LedgerStore
from sessionledger.infrastructure.langgraph import store as store_module
from sessionledger.infrastructure.langgraph.store_items import (
    ITEM_TYPE,
    NAMESPACE_TYPE,
    Stored,
    namespace_prefix,
    now,
)

from tests.conftest import _pg_database, sql_url

DIMS = 6


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic bag of letters: texts sharing letters are near."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIMS
        for char in text.lower():
            if char.isalpha():
                vector[ord(char) % DIMS] += 1.0
        vectors.append(vector)
    return vectors


async def aembed(texts: Sequence[str]) -> list[list[float]]:
    return embed(texts)


@pytest.fixture
def ledger(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as service:
        yield service


@pytest.fixture
def user(unique: Any) -> str:
    """A user of this test alone (the PostgreSQL database is shared by the whole run)."""
    return str(unique("user"))


@pytest.fixture
def second_service(database_url: str, ledger: SessionService) -> Iterator[SessionService]:
    """Another service on the same database, as another process has (memory: the same one)."""
    if database_url == "memory://":
        yield ledger
        return
    with open_service(database_url) as service:
        yield service


def test_another_users_namespaces_are_neither_readable_nor_writable(
    ledger: SessionService, user: str
) -> None:
    alice = LedgerStore(service=ledger, user_id=f"{user}-alice")
    bob = LedgerStore(service=ledger, user_id=f"{user}-bob")
    alice.put(("memories", "alice"), "food", {"likes": "pizza"})

    assert bob.get(("memories", "alice"), "food") is None
    assert bob.search(("memories",)) == []
    assert bob.list_namespaces() == []

    bob.put(("memories", "alice"), "food", {"likes": "nothing"})
    bob.delete(("memories", "alice"), "food")
    item = alice.get(("memories", "alice"), "food")
    assert item is not None and item.value == {"likes": "pizza"}
    assert [i.value for i in alice.search(("memories",))] == [{"likes": "pizza"}]
    assert LedgerStore(service=ledger, user_id=f"{user}-alice").list_namespaces() == [("memories", "alice")]


def test_a_session_taken_by_another_user_is_refused_and_reads_as_absent(
    ledger: SessionService, user: str
) -> None:
    """Whoever creates the ledger session a store's namespace maps to first, another user's
    items never show through the store, and the store refuses to write there."""
    store = LedgerStore(service=ledger, user_id=user)
    taken = store.session_id_of(("memories",))
    ledger.create_session("mallory", session_id=taken)
    planted = Item(
        value={"v": "planted"}, key="k", namespace=("memories",), created_at=now(), updated_at=now()
    )
    ledger.append_entries(taken, [Entry(ITEM_TYPE, "k", Stored(planted, None, None, {}).payload())])

    assert store.get(("memories",), "k") is None
    with pytest.raises(ValueError, match="another user's"):
        store.put(("memories",), "k", {"v": 1})


def test_two_stores_on_one_database_see_each_others_writes(
    ledger: SessionService, second_service: SessionService, user: str
) -> None:
    one = LedgerStore(service=ledger, user_id=user)
    other = LedgerStore(service=second_service, user_id=user)
    assert other.get(("docs",), "a") is None  # read before the first write: nothing remembered

    one.put(("docs",), "a", {"v": 1})
    seen = other.get(("docs",), "a")
    assert seen is not None and seen.value == {"v": 1}
    assert other.list_namespaces() == [("docs",)]

    other.put(("docs",), "a", {"v": 2})
    other.put(("docs", "deep"), "b", {"v": 3})
    assert [(i.key, i.value) for i in one.search(("docs",))] == [("b", {"v": 3}), ("a", {"v": 2})]

    one.delete(("docs",), "a")
    assert other.get(("docs",), "a") is None
    assert other.list_namespaces() == [("docs", "deep")]


def test_every_put_and_delete_is_a_ledger_record_and_verifies(ledger: SessionService, user: str) -> None:
    store = LedgerStore(service=ledger, user_id=user)
    store.put(("memories", "u1"), "food", {"likes": "pizza"})
    store.put(("memories", "u1"), "food", {"likes": "sushi"})
    store.delete(("memories", "u1"), "food")
    store.put(("memories", "u1"), "pet", {"name": "rex"})

    session_id = store.session_id_of(("memories", "u1"))
    records = ledger.records(session_id, user_id=user)
    said = [
        (r.kind, r.payload["key"] if r.kind is Kind.ENTRY else r.payload["keys"])
        for r in records
        if r.kind in (Kind.ENTRY, Kind.FORGOTTEN) and r.payload is not None
    ]
    assert said == [
        (Kind.ENTRY, "food"),
        (Kind.ENTRY, "food"),
        (Kind.FORGOTTEN, ["food"]),
        (Kind.ENTRY, "pet"),
    ]
    values = [r.payload["value"]["value"] for r in records if r.kind is Kind.ENTRY and r.payload]
    assert values == [{"likes": "pizza"}, {"likes": "sushi"}, {"name": "rex"}]
    sessions = ledger.list_sessions(user)
    assert session_id in {s.id for s in sessions} and len(sessions) == 2  # the namespace's, the directory
    assert all(verify(ledger, s.id).ok for s in sessions)
    assert store.get(("memories", "u1"), "food") is None


def _pairs(found: list[Any]) -> list[tuple[str, float | None]]:
    return [(item.key, None if item.score is None else round(item.score, 9)) for item in found]


@pytest.mark.parametrize(
    "embedder",
    [embed, aembed, DeterministicFakeEmbedding(size=DIMS)],
    ids=["function", "async-function", "langchain-embeddings"],
)
def test_semantic_search_ranks_as_langgraphs_in_memory_store(
    ledger: SessionService, embedder: Any, user: str, vectors_url: str
) -> None:
    index: Any = {"dims": DIMS, "embed": embedder, "fields": ["text", "chunks[*]"]}
    ours = LedgerStore(service=ledger, index=index, user_id=user, vectors=vectors_url)
    theirs = InMemoryStore(index=index)
    documents = [
        ("a", {"text": "apples and pears"}, None),
        ("b", {"text": "zebra", "chunks": ["quiz", "apple pie"]}, None),
        ("c", {"text": "banana bread"}, None),
        ("d", {"text": "apples"}, False),  # stored, not indexed
        ("e", {"text": "xylophone", "other": "apples"}, ["other"]),  # indexed on another field
        ("f", {"text": "kiwi", "kind": "fruit"}, None),
    ]

    async def load(store: BaseStore) -> None:
        for key, value, indexed in documents:
            await store.aput(("docs",), key, value, index=indexed)

    for store in (ours, theirs):
        asyncio.run(load(store))
    for query, limit, offset, flt in [
        ("apple", 10, 0, None),
        ("apple", 2, 1, None),
        ("banana", 3, 0, None),
        ("fruit kiwi", 10, 0, {"kind": "fruit"}),
    ]:
        mine = asyncio.run(ours.asearch(("docs",), query=query, limit=limit, offset=offset, filter=flt))
        peer = asyncio.run(theirs.asearch(("docs",), query=query, limit=limit, offset=offset, filter=flt))
        scored = [pair for pair in _pairs(peer) if pair[1] is not None]
        assert [pair for pair in _pairs(mine) if pair[1] is not None] == scored, query
        assert sorted(i.key for i in mine) == sorted(i.key for i in peer), query
    if embedder is not aembed:
        assert _pairs(ours.search(("docs",), query="apple", limit=3)) == _pairs(
            theirs.search(("docs",), query="apple", limit=3)
        )


def test_an_embeddings_string_is_a_one_line_error(ledger: SessionService) -> None:
    with pytest.raises(ValueError, match="init_embeddings") as raised:
        LedgerStore(service=ledger, index={"dims": 3, "embed": "openai:text-embedding-3-small"})
    assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="dims"):
        LedgerStore(service=ledger, index={"embed": embed})  # type: ignore[typeddict-item]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    for url in _pg_database():
        yield url.replace("postgresql+psycopg://", "postgresql://", 1)


TTL_MINUTES = 1.5 / 60
"""1.5 seconds."""


def _expiry_story(store: BaseStore, sweep: Any) -> list[Any]:
    """Items with a short time to live and without, read (no refresh), expired, then swept."""
    ns = ("ttl",)
    store.put(ns, "short", {"v": 1}, ttl=TTL_MINUTES)
    store.put(ns, "kept", {"v": 2}, ttl=None)
    store.put(ns, "also-short", {"v": 3}, ttl=TTL_MINUTES)
    seen = [store.get(ns, "short", refresh_ttl=False) is not None, sweep()]
    time.sleep(1.6)
    seen.append(store.get(ns, "short", refresh_ttl=False) is not None)  # expired, not swept: still read
    seen.append(sweep())
    seen.append([i.key for i in store.search(ns, refresh_ttl=False)])
    seen.append(store.list_namespaces())
    return seen


def test_expiry_and_sweep_as_postgres_store(ledger: SessionService, postgres_url: str, user: str) -> None:
    ttl: TTLConfig = {"default_ttl": None, "refresh_on_read": False}
    with PostgresStore.from_conn_string(postgres_url, ttl=ttl) as peer:
        peer.setup()
        peer_story = _expiry_story(peer, peer.sweep_ttl)
    ours = LedgerStore(service=ledger, ttl=ttl, user_id=user)
    assert _expiry_story(ours, ours.sweep_ttl) == peer_story == [True, 0, True, 2, ["kept"], [("ttl",)]]


def test_a_read_refreshes_the_time_to_live(ledger: SessionService, user: str) -> None:
    """langgraph's `refresh_on_read`: a get, or a search for what it returns, moves the expiry to
    the read's time plus the item's time to live; `refresh_ttl=False` does not. (PostgresStore keeps
    whole minutes of a time to live for its refresh, so seconds are not compared with it.)"""
    store = LedgerStore(service=ledger, ttl={"refresh_on_read": True}, user_id=user)
    ns = ("ttl",)
    for key in ("got", "searched", "read-without-refresh", "unread"):
        store.put(ns, key, {"key": key}, ttl=TTL_MINUTES)
    time.sleep(1.0)
    assert store.get(ns, "got") is not None
    assert [i.key for i in store.search(ns, filter={"key": "searched"})] == ["searched"]
    assert store.get(ns, "read-without-refresh", refresh_ttl=False) is not None
    time.sleep(1.0)
    assert store.sweep_ttl() == 2
    assert sorted(i.key for i in store.search(ns, refresh_ttl=False)) == ["got", "searched"]


class _Between:
    """Runs `write` once, just before the store's next append: another writer's put or delete
    landing between a read and the refresh or expiry the store writes from it."""

    def __init__(self, service: SessionService, monkeypatch: pytest.MonkeyPatch) -> None:
        self.write: Any = None
        steps = service.append_steps
        store = steps.store_entries

        def store_after_the_write(*args: Any, **kwargs: Any) -> Any:
            write, self.write = self.write, None
            if write is not None:
                write()
            return store(*args, **kwargs)

        monkeypatch.setattr(steps, "store_entries", store_after_the_write)


def _values(store: BaseStore, ns: tuple[str, ...], *keys: str) -> list[Any]:
    found = [store.get(ns, key, refresh_ttl=False) for key in keys]
    return [None if item is None else item.value for item in found]


@pytest.mark.parametrize("ttl", [10**10, float("inf"), float("nan"), "5", True], ids=repr)
def test_a_ttl_that_is_no_number_of_minutes_is_a_one_line_error_and_stores_nothing(
    ledger: SessionService, user: str, ttl: Any
) -> None:
    store = LedgerStore(service=ledger, user_id=user)
    with pytest.raises(ValueError, match="ttl") as raised:
        store.batch([PutOp(("t",), "good", {"v": 1}), PutOp(("t",), "bad", {"v": 2}, ttl=ttl)])
    assert "\n" not in str(raised.value)
    assert store.search(("t",)) == [] and store.list_namespaces() == []


@pytest.mark.parametrize(
    ("namespace", "key", "message"),
    [
        (("n" * 1100,), "k", "a namespace may hold at most 1024 characters.*this one has 1101"),
        (("a",) * 600, "k", "a namespace may hold at most 1024 characters.*this one has 1200"),
        (("ok",), "k" * 1025, "an item's key may hold at most 1024 characters, not 1025"),
    ],
    ids=["a long label", "many labels", "a long key"],
)
def test_a_namespace_or_key_too_long_to_store_is_named_in_one_line(
    ledger: SessionService, user: str, namespace: tuple[str, ...], key: str, message: str
) -> None:
    """Before, a long namespace was refused as "an entry's key must be at most 1024 characters",
    naming a key the caller never gave (the directory's), after the batch's other puts were stored."""
    store = LedgerStore(service=ledger, user_id=user)
    with pytest.raises(ValueError, match=message):
        store.batch([PutOp(("t",), "good", {"v": 1}), PutOp(namespace, key, {"v": 2})])
    assert store.search(()) == [] and store.list_namespaces() == []


@pytest.mark.parametrize(
    "value", [{"v": float("nan")}, {"v": {1, 2}}, {"v": "x" * 2_000_000}], ids=["nan", "a set", "too big"]
)
def test_a_value_the_ledger_refuses_stores_nothing_of_its_batch(
    ledger: SessionService, user: str, value: dict[str, Any]
) -> None:
    """Every namespace's records are checked before the first is stored. Before, the batch's
    earlier namespaces were stored and then the refusal was raised."""
    store = LedgerStore(service=ledger, user_id=user)
    store.put(("kept",), "k", {"v": 0})
    with pytest.raises(ValueError):
        store.batch(
            [
                PutOp(("kept",), "k", {"v": 1}),
                PutOp(("first",), "a", {"v": 1}),
                PutOp(("second",), "b", value),
            ]
        )
    assert store.list_namespaces() == [("kept",)]
    assert store.get(("kept",), "k").value == {"v": 0}  # type: ignore[union-attr]


def test_the_empty_namespace_holds_nothing_and_reading_it_changes_nothing(
    ledger: SessionService, user: str
) -> None:
    """`get((), key)` is `None`, as on `InMemoryStore`. Before, the empty namespace's session was
    the directory's: on a new store the read took the directory for a namespace, and every later
    search and listing of that store came back empty; after a search it raised `AttributeError`."""
    LedgerStore(service=ledger, user_id=user).put(("memories",), "k", {"v": 1})
    for warm in (False, True):
        store = LedgerStore(service=ledger, user_id=user)
        if warm:
            assert [i.key for i in store.search(())] == ["k"]
        assert store.get((), "memories.") is None
        assert store.get((), "k") is None
        assert [i.key for i in store.search(())] == ["k"]
        assert store.list_namespaces() == [("memories",)]


def test_a_refresh_never_undoes_a_put_or_a_delete_recorded_after_its_read(
    ledger: SessionService,
    second_service: SessionService,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    user: str,
) -> None:
    """A read's TTL refresh is written after the read: another store's put or delete in between
    stays (on `PostgresStore` the refresh moves the expiry of the row as it then is). Before, the
    refresh wrote the item back as read: the put was undone, the deleted item came back."""
    ttl: TTLConfig = {"default_ttl": 60, "refresh_on_read": True}
    reader = LedgerStore(service=ledger, ttl=ttl, user_id=user)
    writer = LedgerStore(service=second_service, ttl=ttl, user_id=user)
    between = _Between(ledger, monkeypatch)
    ns = ("memories", "refresh")
    reader.put(ns, "counter", {"n": 0})
    reader.put(ns, "gone", {"n": 0})

    between.write = lambda: writer.put(ns, "counter", {"n": 1})
    assert reader.get(ns, "counter").value == {"n": 0}  # type: ignore[union-attr]  # as read
    between.write = lambda: writer.delete(ns, "gone")
    assert sorted(i.key for i in reader.search(ns)) == ["counter", "gone"]

    assert between.write is None  # each write ran
    fresh = LedgerStore(service=ledger, ttl=ttl, user_id=user)
    for store in (reader, writer, fresh):
        assert _values(store, ns, "counter", "gone") == [{"n": 1}, None]
    # a refresh that applies still moves the expiry: the next read refreshes the newest entry
    expires = _expiry(fresh, ns, "counter")
    time.sleep(0.01)
    assert reader.get(ns, "counter").value == {"n": 1}  # type: ignore[union-attr]
    assert _expiry(fresh, ns, "counter") > expires
    assert _values(fresh, ns, "counter") == [{"n": 1}]
    assert verify(ledger, reader.session_id_of(ns)).ok


def _expiry(store: LedgerStore, ns: tuple[str, ...], key: str) -> Any:
    return store._live(ns)[key].expires_at


def test_a_sweep_never_forgets_an_item_put_again_after_its_read(
    ledger: SessionService,
    second_service: SessionService,
    monkeypatch: pytest.MonkeyPatch,
    user: str,
    vectors_url: str,
) -> None:
    """A sweep records the expiry of what it read as expired: the same key put again by another
    store before that record stays, with its vectors (a search by meaning finds it). Before, the
    sweep forgot the key, and the new value with it."""
    index: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    sweeper = LedgerStore(service=ledger, index=index, user_id=user, vectors=vectors_url)
    writer = LedgerStore(service=second_service, index=index, user_id=user, vectors=vectors_url)
    between = _Between(ledger, monkeypatch)
    ns = ("memories", "sweep")
    sweeper.put(ns, "short", {"text": "apples"}, ttl=0.05 / 60)
    sweeper.put(ns, "expires", {"text": "pears"}, ttl=0.05 / 60)
    sweeper.put(ns, "kept", {"text": "zebra"})
    time.sleep(0.2)

    between.write = lambda: writer.put(ns, "short", {"text": "bananas"}, ttl=60)
    sweeper.sweep_ttl()

    assert between.write is None
    fresh = LedgerStore(service=ledger, index=index, user_id=user, vectors=vectors_url)
    for store in (sweeper, writer, fresh):
        assert _values(store, ns, "short", "expires", "kept") == [
            {"text": "bananas"},
            None,
            {"text": "zebra"},
        ]
        assert [i.key for i in store.search(ns, query="bananas", limit=1)] == ["short"]
    assert fresh.sweep_ttl() == 0
    assert verify(ledger, sweeper.session_id_of(ns)).ok


def test_the_sweeper_thread_forgets_expired_items(ledger: SessionService, user: str) -> None:
    store = LedgerStore(service=ledger, ttl={"sweep_interval_minutes": 1}, user_id=user)
    store.put(("t",), "k", {"v": 1}, ttl=0.3 / 60)
    done = store.start_ttl_sweeper(sweep_interval_minutes=0.5 / 60)  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while store.get(("t",), "k", refresh_ttl=False) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert store.stop_ttl_sweeper(timeout=5)
    assert done.result(timeout=1) is None
    assert store.get(("t",), "k") is None


def test_expired_items_are_omitted_when_asked_and_default_ttl_applies(
    ledger: SessionService, user: str
) -> None:
    store = LedgerStore(
        service=ledger, ttl={"default_ttl": TTL_MINUTES / 3, "omit_expired": True}, user_id=user
    )
    store.put(("t",), "k", {"v": 1})
    assert store.get(("t",), "k", refresh_ttl=False) is not None
    time.sleep(0.7)
    assert store.get(("t",), "k") is None
    assert store.search(("t",)) == []
    assert store.list_namespaces() == []
    assert store.sweep_ttl() == 1


def test_the_async_methods_answer_as_the_sync_ones(ledger: SessionService, user: str) -> None:
    store = LedgerStore(service=ledger, user_id=user)

    async def story() -> list[Any]:
        await store.aput(("a", "b"), "k", {"v": 1})
        await store.aput(("a", "c"), "k", {"v": 2})
        got = await store.aget(("a", "b"), "k")
        found = await store.asearch(("a",), filter={"v": {"$gt": 1}})
        await store.adelete(("a", "b"), "k")
        return [
            got.value if got else None,
            [i.value for i in found],
            await store.alist_namespaces(prefix=("a",)),
            await store.aget(("a", "b"), "k"),
        ]

    assert asyncio.run(story()) == [{"v": 1}, [{"v": 2}], [("a", "c")], None]


def test_a_store_opened_on_a_url_closes_its_service(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with LedgerStore(url) as store:
        store.put(("docs",), "a", {"v": 1})
    with LedgerStore(url) as again:
        item = again.get(("docs",), "a")
        assert item is not None and item.value == {"v": 1}


def test_a_store_opens_its_ledger_at_with_and_never_on_the_event_loop(
    request: pytest.FixtureRequest, lazy_opens: list[int]
) -> None:
    """`LedgerStore(url)` connects to nothing yet; `with` opens the ledger, so a database that
    cannot be used fails there, and `async with` (or a first coroutine) opens it off the loop: an
    async handler that made a store per request had its loop blocked while the store connected
    and checked the schema (26 ms each time on PostgreSQL)."""
    url = sql_url(request, "postgres")
    LedgerStore(url).close()
    assert lazy_opens == []

    async def handler() -> int:
        async with LedgerStore(url) as store:
            assert len(lazy_opens) == 1
            await store.aput(("docs",), "a", {"v": 1})
            assert (await store.aget(("docs",), "a")) is not None
        store = LedgerStore(url)
        try:
            assert await store.asearch(("docs",)) != []
        finally:
            await store.aclose()
        return threading.get_ident()

    loop_thread = asyncio.run(handler())
    assert len(lazy_opens) == 2 and loop_thread not in lazy_opens
    missing = url.rsplit("/", 1)[0] + f"/sl_missing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(sa.exc.OperationalError), LedgerStore(missing):
        pass


def test_a_namespace_deleted_by_the_operator_reads_as_absent(ledger: SessionService, user: str) -> None:
    """The ledger's deletion of a namespace's session reaches a store that read it before."""
    store = LedgerStore(service=ledger, user_id=user)
    store.put(("memories",), "k", {"v": 1})
    assert store.get(("memories",), "k") is not None
    ledger.delete_session(store.session_id_of(("memories",)))
    assert store.get(("memories",), "k") is None
    assert store.search(("memories",)) == [] and store.list_namespaces() == []


def test_changing_a_returned_value_changes_nothing_stored(ledger: SessionService, user: str) -> None:
    store = LedgerStore(service=ledger, user_id=user)
    store.put(("m",), "k", {"tags": ["a"], "n": 1})
    got = store.get(("m",), "k")
    assert got is not None
    got.value["tags"].append("changed")
    store.search(("m",))[0].value["n"] = 2
    again = store.get(("m",), "k")
    assert again is not None and again.value == {"tags": ["a"], "n": 1}


def test_namespaces_past_the_mirrored_ones_are_read_again(
    ledger: SessionService, second_service: SessionService, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MIRRORED_SESSIONS", 1)
    store = LedgerStore(service=ledger, user_id=user)
    writer = LedgerStore(service=second_service, user_id=user)
    for name in ("a", "b", "c"):
        writer.put((name,), "k", {"v": name})
    assert [store.get((name,), "k").value for name in ("a", "b", "c")] == [{"v": "a"}, {"v": "b"}, {"v": "c"}]  # type: ignore[union-attr]
    writer.put(("a",), "k", {"v": "a2"})
    writer.delete(("c",), "k")
    assert store.get(("a",), "k").value == {"v": "a2"}  # type: ignore[union-attr]
    assert store.get(("c",), "k") is None
    assert sorted(i.value["v"] for i in store.search(())) == ["a2", "b"]


def directory_entries(ledger: SessionService, store: LedgerStore, user: str) -> list[str]:
    """The keys of the namespace entries in the user's directory session, in the order written."""
    namespaces = {store.session_id_of((name,)) for name in "abc"}
    (directory,) = [s.id for s in ledger.list_sessions(user) if s.id not in namespaces]
    return [
        r.payload["key"]
        for r in ledger.records(directory)
        if r.kind is Kind.ENTRY and r.payload is not None and r.payload["type"] == NAMESPACE_TYPE
    ]


def test_a_store_that_never_knew_a_namespace_writes_it_into_the_directory_once(
    ledger: SessionService, second_service: SessionService, user: str
) -> None:
    """A store of another process (or one restarted) finds the namespace's session is its user's:
    it neither makes it again nor records the namespace in the directory a second time."""
    LedgerStore(service=ledger, user_id=user).put(("a",), "k", {"v": 1})
    later = LedgerStore(service=second_service, user_id=user)
    later.put(("a",), "k", {"v": 2})
    later.put(("b",), "k", {"v": 3})
    assert directory_entries(ledger, later, user) == [namespace_prefix(("a",)), namespace_prefix(("b",))]
    assert [(i.namespace, i.value) for i in later.search(())] == [(("b",), {"v": 3}), (("a",), {"v": 2})]


def test_namespaces_past_the_remembered_ones_are_asked_about_again(
    ledger: SessionService, user: str, vectors_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store remembers which sessions are its user's for the `OWNED_SESSIONS` used last; one it
    forgot is asked about again when used: its reads, puts and semantic searches answer as before."""
    monkeypatch.setattr(store_module, "OWNED_SESSIONS", 1)
    monkeypatch.setattr(store_module, "MIRRORED_SESSIONS", 1)
    index: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    store = LedgerStore(service=ledger, index=index, user_id=user, vectors=vectors_url)
    words = {"a": "apple", "b": "banana", "c": "cherry"}
    for turn in range(2):
        for name, word in words.items():
            store.put((name,), f"k{turn}", {"text": f"{word} {turn}"})
            assert store.get((name,), "k0").value == {"text": f"{word} 0"}  # type: ignore[union-attr]
    assert directory_entries(ledger, store, user) == [namespace_prefix((name,)) for name in words]
    assert sorted(store.list_namespaces()) == [("a",), ("b",), ("c",)]
    found = store.search((), query="banana", limit=2)
    assert {(i.namespace, i.key) for i in found} == {(("b",), "k0"), (("b",), "k1")}
    assert all(verify(ledger, s.id).ok for s in ledger.list_sessions(user))


def test_an_async_service_serves_both_faces(database_url: str, user: str) -> None:
    async def story() -> list[Any]:
        async with open_async_service(database_url) as service:
            store = LedgerStore(service=service, user_id=user)
            await store.aput(("a",), "k", {"v": 1})
            store.put(("a",), "j", {"v": 2})  # the synchronous face: the same ledger
            got = await store.aget(("a",), "j")
            return [got.value if got else None, sorted(i.key for i in store.search(("a",)))]

    assert asyncio.run(story()) == [{"v": 2}, ["j", "k"]]
    with pytest.raises(ValueError, match="SessionService"):
        LedgerStore(service=object())  # type: ignore[arg-type]


class _Turn(TypedDict):
    user: str
    text: str
    recalled: list[str]


def _remembering_graph(store: BaseStore) -> Any:
    """A graph whose one node recalls the user's memories from `runtime.store` and remembers the
    new text, as langgraph's long-term memory examples do."""

    def remember(state: _Turn, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        namespace = ("memories", state["user"])
        recalled = [item.value["text"] for item in runtime.store.search(namespace, limit=100)]
        runtime.store.put(namespace, str(len(recalled)), {"text": state["text"]})
        return {"recalled": sorted(recalled)}

    graph = StateGraph(_Turn)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    return graph.compile(store=store)


def test_a_compiled_graph_remembers_through_the_store_across_invocations(
    ledger: SessionService, user: str
) -> None:
    graph = _remembering_graph(LedgerStore(service=ledger, user_id=user))
    for text in ("likes tea", "lives in Oslo"):
        graph.invoke({"user": "ada", "text": text, "recalled": []})
    graph.invoke({"user": "bob", "text": "likes chess", "recalled": []})
    answer = asyncio.run(graph.ainvoke({"user": "ada", "text": "?", "recalled": []}))
    assert answer["recalled"] == ["likes tea", "lives in Oslo"]
    again = _remembering_graph(LedgerStore(service=ledger, user_id=user))  # a new process's store
    assert again.invoke({"user": "bob", "text": "?", "recalled": []})["recalled"] == ["likes chess"]
