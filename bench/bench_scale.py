"""Costs flat in the ledger's size, on an unpartitioned ledger and on one hash-partitioned by
session id (`migrate --partitions`, `SESSIONLEDGER_BENCH_SCALE_PARTITIONS`, 8 by default): a small
session's appends, a window read, `verify` of one session, `verify --since` a digest and the next
digest resumed from it (what the relay's scheduled digests cost), on an
empty ledger against the same on a ledger already holding `SESSIONLEDGER_BENCH_SCALE_EVENTS` events
(1,000,000 by default; 10,000,000 is the issue's size), four databases of one server in one run.

The large ledgers' other events belong to sessions of 1,000 events each and are written by the
server itself (`INSERT ... SELECT` over `generate_series`, a million rows per transaction, the
payload texts of the first 1,000 ShareGPT messages in turn, 1.1 KB on average): loading them
through the library would take most of the run and measure the load, not the ledger's size. Their
rows are not a valid hash chain, which no measured call reads, nor in the keyword index (`text_index`
is off: its background indexer, catching up on them, read the ledger through the whole first
10,000,000-event run); each session row names its last
record as its head, so a digest taken over them is consistent. In each database, `append_message`
appends to a session of its own, one event per call; `get_messages` reads, and `verify` checks, a
1,000-event session stored through the batch ingest path; `verify --since` checks the 1,000 events
ingested into ten sessions after a digest of the whole ledger, and the digest resumed from it
takes the same 1,000 events in (`digest_since`); `verify --since --all-heads` also looks up every
head the digest holds, whose cost follows the sessions (reported per session, no flat target).
Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import psycopg
from sessionledger.domain import Message, SessionEvent
from sessionledger.domain.records import event_draft
from sessionledger.infrastructure import SessionService, Settings, open_service
from sessionledger.infrastructure.audit.digest import take_digest
from sessionledger.infrastructure.audit.since import digest_since, verify_since
from sessionledger.infrastructure.audit.verify import verify
from sessionledger.infrastructure.bootstrap import migrate_storage

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved

EVENTS = int(os.environ.get("SESSIONLEDGER_BENCH_SCALE_EVENTS", "1000000"))
PARTITIONS = int(os.environ.get("SESSIONLEDGER_BENCH_SCALE_PARTITIONS", "8"))
SESSION_EVENTS = 1_000
"""Events per session, in the large ledger's other sessions and in the session read back."""
APPEND_ROUNDS, APPENDS_PER_ROUND = 15, 50
READ_ROUNDS = 15
FILL_CHUNK = 1_000_000
"""Events the server writes per transaction while it fills a large ledger."""
SINCE_SESSIONS, SINCE_EVENTS = 10, 1_000
"""`verify --since` checks this many events, ingested into this many sessions after the digest."""
PAYLOADS = 1_000
"""The other sessions' events take their payloads in turn from the first this many ShareGPT messages."""
FLAT = 0.9
"""'Flat': the large ledger's rate at least this share of the empty one's, its read time at most
the inverse."""

_OTHER_SESSIONS = """INSERT INTO sessions (id, app_name, user_id, created_at, metadata, state, version,
    head_position, head_hash, window_events)
    SELECT 'other-' || s, 'bench', 'other', now(), '{}', '{}', %(events)s, %(events)s, repeat('0', 64),
        %(events)s
    FROM generate_series(0, %(sessions)s - 1) AS s"""
_OTHER_EVENTS = """INSERT INTO ledger (session_id, position, version, event_id, kind, occurred_at,
    recorded_at, event_type, branch, synthetic, payload, content_hash, prev_hash, row_hash)
    SELECT 'other-' || (n / %(events)s), n %% %(events)s + 1, n %% %(events)s + 1, 'event-' || n, 'event',
        now(), now(), 'user', NULL, false, (%(payloads)s::text[])[n %% %(kinds)s + 1]::json, repeat('0', 64),
        repeat('0', 64), repeat('0', 64)
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n"""


class Ledger:
    """One database's service: a session to append to, a 1,000-event session to read and verify,
    and a digest with the events ingested since it, to verify and to resume the next digest from."""

    def __init__(self, service: SessionService, messages: list[Message]) -> None:
        self.service = service
        self._appended = self.service.create_session("bench", app_name="bench").id
        self._rounds = _rounds(messages)
        self._read = payloads.session_with(self.service, SESSION_EVENTS)
        since = [self.service.create_session("bench", app_name="bench").id for _ in range(SINCE_SESSIONS)]
        self._digest = take_digest(self.service.ledger)
        fresh = payloads.cycled(SINCE_EVENTS)
        share = SINCE_EVENTS // SINCE_SESSIONS
        for i, session_id in enumerate(since):
            batch = fresh[i * share : (i + 1) * share]
            self.service.ingest([SessionEvent(session_id=session_id, message=message) for message in batch])

    def append_round(self) -> None:
        for message in next(self._rounds):
            self.service.append_message(self._appended, message)

    def read(self) -> int:
        return len(self.service.get_messages(self._read))

    def verify(self) -> None:
        assert verify(self.service, self._read).ok

    def verify_since(self) -> None:
        found = verify_since(self.service.ledger, self._digest)
        assert found.ok and len(found.results) == SINCE_SESSIONS, found.results

    def verify_all_heads(self) -> None:
        found = verify_since(self.service.ledger, self._digest, all_heads=True)
        assert found.ok and found.all_heads, found.results

    @property
    def digest_sessions(self) -> int:
        """The sessions the digest holds: the heads `verify --since --all-heads` looks up."""
        return len(self._digest.sessions)

    def next_digest(self) -> None:
        resumed = digest_since(self.service.ledger, self._digest)
        assert resumed.global_position >= self._digest.global_position + SINCE_EVENTS


def _rounds(messages: list[Message]) -> Iterator[list[Message]]:
    starts = range(0, len(messages), APPENDS_PER_ROUND)
    return (messages[start : start + APPENDS_PER_ROUND] for start in starts)


def fill(url: str, count: int) -> None:
    """`count` events of other sessions, written by the server a million per transaction, then
    planner statistics (as autovacuum would soon have them)."""
    sessions = -(-count // SESSION_EVENTS)
    texts = [
        event_draft(SessionEvent(session_id="other", message=m)).text for m in payloads.messages(PAYLOADS)
    ]
    values = {"events": SESSION_EVENTS, "sessions": sessions, "payloads": texts, "kinds": len(texts)}
    with psycopg.connect(url) as conn:
        conn.execute(_OTHER_SESSIONS, values)
        conn.commit()
        for first in range(0, count, FILL_CHUNK):
            last = min(first + FILL_CHUNK, count) - 1
            conn.execute(_OTHER_EVENTS, {**values, "first": first, "last": last})
            conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def analyze(url: str) -> None:
    """Planner statistics of every database once its sessions are in (as autovacuum would soon
    have them): a never-analyzed empty ledger is planned as if its tables held nothing."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


LAYOUTS = ("unpartitioned", "partitioned")
SIZES = ("empty", "large")


def run() -> list[Row]:
    messages = payloads.cycled((APPEND_ROUNDS + 1) * APPENDS_PER_ROUND)
    cases = [(layout, size) for layout in LAYOUTS for size in SIZES]
    with ExitStack() as stack:
        urls = {case: stack.enter_context(fresh_postgres()) for case in cases}
        for (layout, _), url in urls.items():
            if layout == "partitioned":
                migrate_storage(Settings(database_url=url), partitions=PARTITIONS)
        services = {  # the schemas; no keyword indexer, which would spend the run indexing the fill
            case: stack.enter_context(open_service(url, text_index="off")) for case, url in urls.items()
        }
        for (_, size), url in urls.items():
            if size == "large":
                fill(url, EVENTS)
        ledgers = {case: Ledger(service, messages) for case, service in services.items()}
        for url in urls.values():
            analyze(url)

        def each(call: Callable[[Ledger], object]) -> dict[str, Callable[[], object]]:
            return {_name(case): (lambda ledger=ledger: call(ledger)) for case, ledger in ledgers.items()}

        sinces = interleaved(READ_ROUNDS, each(Ledger.verify_since))  # before other writes since the digest
        digests = interleaved(READ_ROUNDS, each(Ledger.next_digest))
        sweeps = interleaved(READ_ROUNDS, each(Ledger.verify_all_heads))
        held = {_name(case): ledger.digest_sessions for case, ledger in ledgers.items()}
        for ledger in ledgers.values():
            ledger.append_round()  # warm-up: connections, prepared statements, cached heads
        appends = interleaved(APPEND_ROUNDS, each(Ledger.append_round))
        reads = interleaved(READ_ROUNDS, each(Ledger.read))
        verifies = interleaved(READ_ROUNDS, each(Ledger.verify))
    rows = []
    for layout in LAYOUTS:
        large, empty = _name((layout, "large")), _name((layout, "empty"))
        parts = f" ({PARTITIONS} partitions)" if layout == "partitioned" else ""
        ledger = f"{EVENTS:,}-event {layout} ledger{parts}"
        rate = {name: APPENDS_PER_ROUND / appends[name] for name in (large, empty)}
        rows.append(
            Row(
                f"append_message to a small session, on a {ledger}",
                report.rate(rate[large], "events"),
                f"on an empty ledger {report.rate(rate[empty], 'events')}",
                rate[large] / rate[empty],
                f">= {FLAT} of the empty ledger's rate",
                rate[large] >= FLAT * rate[empty],
            )
        )
        for what, medians in (
            (f"get_messages, {SESSION_EVENTS:,}-event session", reads),
            (f"verify of a {SESSION_EVENTS:,}-event session", verifies),
            (f"verify --since, {SINCE_EVENTS:,} new events", sinces),
            (f"a digest resumed from the last, {SINCE_EVENTS:,} new events", digests),
        ):
            rows.append(_time_row(f"{what}, on a {ledger}", medians[large], medians[empty]))
        rows.append(_sweep_row(ledger, sweeps[large], sweeps[empty], held[large] - held[empty]))
    return rows


def _name(case: tuple[str, str]) -> str:
    return "-".join(case)


def _sweep_row(ledger: str, large: float, empty: float, more_sessions: int) -> Row:
    """`verify --since --all-heads`, which looks up every head the digest holds: its cost follows
    the sessions, so what is reported is the cost of each session more (no flat target)."""
    each = (large - empty) / more_sessions * 1e6
    return Row(
        f"verify --since --all-heads, {SINCE_EVENTS:,} new events, on a {ledger}",
        report.duration(large),
        f"on an empty ledger {report.duration(empty)}",
        large / empty,
        f"follows the sessions: {each:.1f} us for each of {more_sessions:,} more",
    )


def _time_row(benchmark: str, large: float, empty: float) -> Row:
    return Row(
        benchmark,
        report.duration(large),
        f"on an empty ledger {report.duration(empty)}",
        large / empty,
        f"<= {1 / FLAT:.2f}x the empty ledger's time",
        large <= empty / FLAT,
    )
