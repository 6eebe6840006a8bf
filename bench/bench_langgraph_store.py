"""`LedgerStore` against langgraph's own `PostgresStore` (langgraph-checkpoint-postgres) on one
PostgreSQL server, in one run: the same items (ShareGPT messages as memories, about 1.1 KB each).

- `put` of a new item, one per call, into one user's namespace (`("memories", user)`);
- `get` of an item by key, in a namespace of 1,000 items;
- `search` of that namespace with a `filter` on a value field (one item in ten matches), first
  page of 10.
The ledger's store reads one namespace's records only, whatever else the database holds, so the
get and search namespaces sit beside 9 other users' namespaces of the same size in both stores.
- `search(query=...)` of a namespace of 10,000 items with an index (256-dimension vectors),
  first page of 10, without and with a `filter` (one item in ten matches): the store as it is
  (candidates from the keyed vectors: pgvector on the embedded pgvector server, as the machine's
  PostgreSQL has none; and sqlite-vec beside a SQLite ledger) against the same store searching as
  it did before the vector stores (`_BruteForce`: every live item's recorded vectors compared in
  Python), on the same ledger in the same run.
Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

import math
import random
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, PutOp, SearchItem, SearchOp
from langgraph.store.postgres import PostgresStore
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.langgraph import LedgerStore
from sessionledger.infrastructure.langgraph.store_items import Stored, ranked

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating, timed
from tests.fakes.embedded_pgvector import embedded_pgvector

PUT_ROUNDS, PUTS_PER_ROUND = 10, 100
ITEMS, USERS = 1_000, 10
READ_ROUNDS, GETS_PER_ROUND, SEARCHES_PER_ROUND = 15, 100, 20
INDEXED_ITEMS, DIMS, QUERY_ROUNDS, QUERIES_PER_ROUND = 10_000, 256, 7, 5


def run() -> list[Row]:
    rows: list[Row] = []
    with fresh_postgres() as url:
        service = open_service(url)
        try:
            with PostgresStore.from_conn_string(url) as peer:
                peer.setup()
                ours = LedgerStore(service=service)
                rows += [*_puts(ours, peer), *_reads(ours, peer)]
            with embedded_pgvector() as vectors:
                rows += _semantic(service, vectors, "PostgreSQL, pgvector")
        finally:
            service.close()
    with (
        tempfile.TemporaryDirectory(prefix="sl_bench_store_") as folder,
        open_service(f"sqlite:///{Path(folder) / 'ledger.db'}") as service,
    ):
        rows += _semantic(service, None, "SQLite, sqlite-vec")
    return rows


def _memory(number: int, text: str) -> dict[str, Any]:
    return {"text": text, "kind": f"kind-{number % 10}", "n": number}


def _puts(ours: BaseStore, peer: BaseStore) -> list[Row]:
    texts = [m.text or "" for m in payloads.cycled(PUTS_PER_ROUND)]

    def putting(store: BaseStore) -> Callable[[], float]:
        namespace = ("memories", f"writer-{uuid.uuid4().hex[:8]}")

        def one_round() -> float:
            keys = [uuid.uuid4().hex for _ in texts]
            return timed(
                lambda: [
                    store.put(namespace, k, _memory(i, t))
                    for i, (k, t) in enumerate(zip(keys, texts, strict=True))
                ]
            )

        return one_round

    cases = {"ours": putting(ours), "peer": putting(peer)}
    for case in cases.values():  # warm up: connections, prepared statements, the sessions
        case()
    medians = alternating(PUT_ROUNDS, cases)
    rates = {name: PUTS_PER_ROUND / seconds for name, seconds in medians.items()}
    return [
        Row(
            "LedgerStore.put, one new item per call",
            report.rate(rates["ours"], "puts"),
            f"PostgresStore {report.rate(rates['peer'], 'puts')}",
            rates["ours"] / rates["peer"],
            "report",
        )
    ]


def _reads(ours: BaseStore, peer: BaseStore) -> list[Row]:
    texts = [m.text or "" for m in payloads.cycled(ITEMS)]
    keys = [f"memory-{i:05d}" for i in range(ITEMS)]
    users = [f"user-{u}" for u in range(USERS)]
    for store in (ours, peer):
        for user in users:
            ops = [
                (("memories", user), k, _memory(i, t))
                for i, (k, t) in enumerate(zip(keys, texts, strict=True))
            ]
            for start in range(0, ITEMS, 100):
                store.batch([PutOp(*op) for op in ops[start : start + 100]])
    namespace = ("memories", users[USERS // 2])
    assert _seen(ours, namespace, keys) == _seen(peer, namespace, keys)
    rng = random.Random(7)
    wanted = [rng.choice(keys) for _ in range(GETS_PER_ROUND)]

    def getting(store: BaseStore) -> Callable[[], float]:
        return lambda: timed(lambda: [store.get(namespace, k) for k in wanted]) / GETS_PER_ROUND

    def searching(store: BaseStore) -> Callable[[], float]:
        filters = [{"kind": f"kind-{i % 10}"} for i in range(SEARCHES_PER_ROUND)]
        return lambda: (
            timed(lambda: [store.search(namespace, filter=f, limit=10) for f in filters]) / len(filters)
        )

    gets = alternating(READ_ROUNDS, {"ours": getting(ours), "peer": getting(peer)})
    searches = alternating(READ_ROUNDS, {"ours": searching(ours), "peer": searching(peer)})
    return [
        Row(
            f"LedgerStore.get, namespace of {ITEMS:,} items",
            report.duration(gets["ours"]),
            f"PostgresStore {report.duration(gets['peer'])}",
            gets["ours"] / gets["peer"],
            "report (time ratio)",
        ),
        Row(
            f"LedgerStore.search(filter=...), namespace of {ITEMS:,} items, first 10",
            report.duration(searches["ours"]),
            f"PostgresStore {report.duration(searches['peer'])}",
            searches["ours"] / searches["peer"],
            "report (time ratio)",
        ),
    ]


def _embed(texts: Sequence[str]) -> list[list[float]]:
    """A unit vector per text, the same for the same text (a stand-in for a model: none is timed)."""
    vectors = []
    for text in texts:
        rng = random.Random(text)
        vector = [rng.gauss(0.0, 1.0) for _ in range(DIMS)]
        norm = math.sqrt(sum(x * x for x in vector))
        vectors.append([x / norm for x in vector])
    return vectors


class _BruteForce(LedgerStore):
    """The store searching as it did before the vector stores: `ranked` over every live item under
    the prefix, each item's recorded vectors compared with the query in Python."""

    def _search(
        self,
        op: SearchOp,
        live: Mapping[tuple[str, ...], Mapping[str, Stored]],
        query: list[float] | None,
    ) -> list[SearchItem]:
        if query is None:
            return super()._search(op, live, query)
        return ranked(op, [s for found in live.values() for s in found.values()], query)


def _semantic(service: Any, vectors: str | None, where: str) -> list[Row]:
    index: Any = {"dims": DIMS, "embed": _embed, "fields": ["text"]}
    user = f"semantic-{uuid.uuid4().hex[:8]}"
    ours = LedgerStore(service=service, index=index, user_id=user, vectors=vectors)
    brute = _BruteForce(service=service, index=index, user_id=user, vectors=vectors)
    namespace = ("memories", "semantic")
    texts = [m.text or "" for m in payloads.cycled(INDEXED_ITEMS)]
    for start in range(0, INDEXED_ITEMS, 200):
        ours.batch(
            [
                PutOp(namespace, f"m-{i:05d}", _memory(i, f"{i} {texts[i]}"))
                for i in range(start, min(start + 200, INDEXED_ITEMS))
            ]
        )
    queries = [texts[i] for i in range(0, 50 * QUERIES_PER_ROUND, 50)]
    rows = []
    for label, flt in (("", None), (", filter", {"kind": "kind-3"})):
        for q in queries[:3]:  # what both must answer alike before they are timed
            mine, theirs = (
                ours.search(namespace, query=q, filter=flt),
                brute.search(namespace, query=q, filter=flt),
            )
            assert [(i.key, round(i.score or 0, 6)) for i in mine] == [
                (i.key, round(i.score or 0, 6)) for i in theirs
            ]

        def searching(store: BaseStore, flt: Any = flt) -> Callable[[], float]:
            return lambda: (
                timed(lambda: [store.search(namespace, query=q, filter=flt) for q in queries]) / len(queries)
            )

        medians = alternating(QUERY_ROUNDS, {"ours": searching(ours), "brute": searching(brute)})
        rows.append(
            Row(
                f"LedgerStore.search(query=...{label}), {INDEXED_ITEMS:,} items, {DIMS} dims, {where}",
                report.duration(medians["ours"]),
                f"brute force {report.duration(medians['brute'])}",
                medians["ours"] / medians["brute"],
                "report (time ratio)",
            )
        )
    ours.close()
    brute.close()
    return rows


def _seen(store: BaseStore, namespace: tuple[str, ...], keys: list[str]) -> list[Any]:
    """What both stores must answer alike before they are timed."""
    got = [store.get(namespace, k) for k in keys[:5]]
    found = store.search(namespace, filter={"kind": "kind-3"}, limit=1000)
    return [[(i.key, i.value) for i in got if i], sorted(i.key for i in found)]


if __name__ == "__main__":
    report.main(run)
