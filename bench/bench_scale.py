"""Costs flat in the ledger's size: a small session's appends and window read on an empty ledger
against the same on a ledger already holding `SESSIONLEDGER_BENCH_SCALE_EVENTS` events (1,000,000
by default), two databases of the same server in one run.

The large ledger's other events belong to sessions of 1,000 events each and are written by the
server itself (`INSERT ... SELECT` over `generate_series`, the payload texts of the first 1,000
ShareGPT messages in turn, 1.1 KB on average): loading a million events through the library would
take most of the run and measure the load, not the ledger's size. Their rows are not a valid hash
chain, which neither measured call reads. In each database, `append_message` appends to a session
of its own, one event per call, and `get_messages` reads a 1,000-event session stored through the
batch ingest path. Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack

import psycopg
from sessionledger.domain import Message, SessionEvent
from sessionledger.domain.records import event_draft
from sessionledger.infrastructure import SessionService, open_service

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved

EVENTS = int(os.environ.get("SESSIONLEDGER_BENCH_SCALE_EVENTS", "1000000"))
SESSION_EVENTS = 1_000
"""Events per session, in the large ledger's other sessions and in the session read back."""
APPEND_ROUNDS, APPENDS_PER_ROUND = 15, 50
READ_ROUNDS = 15
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
    FROM generate_series(0, %(count)s - 1) AS n"""


class Ledger:
    """One database's service, with a session to append to and a 1,000-event session to read."""

    def __init__(self, service: SessionService, messages: list[Message]) -> None:
        self.service = service
        self._appended = self.service.create_session("bench", app_name="bench").id
        self._rounds = _rounds(messages)
        self._read = payloads.session_with(self.service, SESSION_EVENTS)

    def append_round(self) -> None:
        for message in next(self._rounds):
            self.service.append_message(self._appended, message)

    def read(self) -> int:
        return len(self.service.get_messages(self._read))


def _rounds(messages: list[Message]) -> Iterator[list[Message]]:
    starts = range(0, len(messages), APPENDS_PER_ROUND)
    return (messages[start : start + APPENDS_PER_ROUND] for start in starts)


def fill(url: str, count: int) -> None:
    """`count` events of other sessions, written by the server, then planner statistics (as
    autovacuum would soon have them)."""
    sessions = -(-count // SESSION_EVENTS)
    texts = [
        event_draft(SessionEvent(session_id="other", message=m)).text for m in payloads.messages(PAYLOADS)
    ]
    values = {
        "events": SESSION_EVENTS,
        "sessions": sessions,
        "count": count,
        "payloads": texts,
        "kinds": len(texts),
    }
    with psycopg.connect(url) as conn:
        conn.execute(_OTHER_SESSIONS, values)
        conn.execute(_OTHER_EVENTS, values)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def run() -> list[Row]:
    messages = payloads.cycled((APPEND_ROUNDS + 1) * APPENDS_PER_ROUND)
    with ExitStack() as stack:
        urls = {name: stack.enter_context(fresh_postgres()) for name in ("empty", "large")}
        services = {name: stack.enter_context(open_service(url)) for name, url in urls.items()}  # schemas
        fill(urls["large"], EVENTS)
        ledgers = {name: Ledger(service, messages) for name, service in services.items()}
        for ledger in ledgers.values():
            ledger.append_round()  # warm-up: connections, prepared statements, cached heads
        appends = interleaved(APPEND_ROUNDS, {name: ledger.append_round for name, ledger in ledgers.items()})
        reads = interleaved(READ_ROUNDS, {name: ledger.read for name, ledger in ledgers.items()})
    rates = {name: APPENDS_PER_ROUND / seconds for name, seconds in appends.items()}
    return [
        Row(
            f"append_message to a small session, on a {EVENTS:,}-event ledger",
            report.rate(rates["large"], "events"),
            f"on an empty ledger {report.rate(rates['empty'], 'events')}",
            rates["large"] / rates["empty"],
            f">= {FLAT} of the empty ledger's rate",
            rates["large"] >= FLAT * rates["empty"],
        ),
        Row(
            f"get_messages, {SESSION_EVENTS:,}-event session, on a {EVENTS:,}-event ledger",
            report.duration(reads["large"]),
            f"on an empty ledger {report.duration(reads['empty'])}",
            reads["large"] / reads["empty"],
            f"<= {1 / FLAT:.2f}x the empty ledger's time",
            reads["large"] <= reads["empty"] / FLAT,
        ),
    ]
