"""The ledger on PostgreSQL against raw psycopg on the same database.

- appends: `append_message`, one event per call as an agent appends, against a raw single-row
  INSERT + commit loop into a copy of the ledger table (same columns, constraints and indexes),
  the same payload text, the same server and durability settings; and, for the record, against
  the floor of one autocommitted INSERT per event (a single round trip), and against the append's
  own statement (it moves the session head and inserts the row) run alone the same way, its
  values built beforehand: the database's share of an append and the client's, in one run;
- the active window of a 1,000-event session (`get_events(active)`, `get_messages`) against a raw
  SELECT of those rows (psycopg decodes the JSON payloads, as the ledger must too);
- `get_events(last_n=20)` on a 100,000-event session against a 1,000-event one: must not grow;
- `SessionService.ingest` loading that session, 2,000 events per transaction, against raw COPYs of
  2,000 ledger rows each (the bulk floor).
Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
from sessionledger.domain import Message, SessionEvent
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.write_plans import LedgerHead, appended_event
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.appends import head_moves, statement_values
from sessionledger.infrastructure.ledger.driver import Autocommit, DriverStatement
from sessionledger.infrastructure.ledger.rows import head_of, ledger_row
from sessionledger.infrastructure.service import append_draft

from bench import payloads, raw, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved, timed

APPEND_ROUNDS, APPENDS_PER_ROUND = 16, 100
READ_ROUNDS = 40
WINDOW_EVENTS = 1_000
LONG_EVENTS = 100_000
LAST_N, LAST_N_ROUNDS = 20, 60
COPY_ROWS = 20_000

T = TypeVar("T")


def run() -> list[Row]:
    with fresh_postgres() as url, open_service(url) as service, psycopg.connect(url) as conn:
        return [
            *_appends(service, conn, url),
            _append_layers(service),
            *_window_reads(service, conn),
            *_last_n(service, conn),
        ]


def _appends(service: SessionService, conn: psycopg.Connection, url: str) -> list[Row]:
    messages = payloads.messages(APPEND_ROUNDS * APPENDS_PER_ROUND)
    session_id = service.create_session("bench", app_name="bench").id
    raw.create_table(conn)
    ledger_batches = _rounds(messages)
    # the two raw loops store the same messages at positions of their own (odd and even)
    committed_batches = _rounds([raw.row_of(m, 2 * n + 1) for n, m in enumerate(messages)])
    autocommit_batches = _rounds([raw.row_of(m, 2 * n + 2) for n, m in enumerate(messages)])
    sql, statement_params = _statements(service, messages)
    statement_batches = _rounds(statement_params)

    with psycopg.connect(url, autocommit=True) as autocommit:
        cases = {
            "ledger": lambda: [service.append_message(session_id, m) for m in next(ledger_batches)],
            "committed": lambda: [raw.insert(conn, row) for row in next(committed_batches)],
            "autocommit": lambda: [raw.insert(autocommit, row) for row in next(autocommit_batches)],
            "statement": lambda: [autocommit.execute(sql, params) for params in next(statement_batches)],
        }
        for case in cases.values():  # warm up: pooled connections, prepared statements, caches
            case()
        medians = interleaved(APPEND_ROUNDS - 1, cases)
    rates = {name: APPENDS_PER_ROUND / seconds for name, seconds in medians.items()}
    committed = rates["ledger"] / rates["committed"]
    return [
        Row(
            "append_message, sequential (1 event per transaction)",
            report.rate(rates["ledger"], "events"),
            f"raw INSERT + commit {report.rate(rates['committed'], 'events')}",
            committed,
            ">= 0.80 of raw rate",
            committed >= 0.8,
        ),
        Row(
            "append_message against the floor: one autocommitted raw INSERT",
            report.rate(rates["ledger"], "events"),
            f"raw autocommit INSERT {report.rate(rates['autocommit'], 'events')}",
            rates["ledger"] / rates["autocommit"],
            "report",
        ),
        Row(
            "  the append's own statement alone (head move + row), values built beforehand",
            report.rate(rates["statement"], "events"),
            f"raw autocommit INSERT {report.rate(rates['autocommit'], 'events')}",
            rates["statement"] / rates["autocommit"],
            "report",
        ),
        Row(
            "  append_message against its own statement alone (the client's share)",
            report.rate(rates["ledger"], "events"),
            f"the statement alone {report.rate(rates['statement'], 'events')}",
            rates["ledger"] / rates["statement"],
            "report",
        ),
    ]


def _statements(service: SessionService, messages: Sequence[Message]) -> tuple[str, list[Any]]:
    """The SQL of the one-event append on PostgreSQL and its parameters for `messages` appended in
    order to a session of their own, built as `append_message` builds them, before any clock starts."""
    engine = service.ledger.engine  # type: ignore[attr-defined]  # the SQL ledger's, on PostgreSQL
    statement = DriverStatement(statements.APPEND_ROW, engine.dialect)
    session_id = service.create_session("bench", app_name="bench").id
    with engine.connect() as conn:
        head = head_of(conn.execute(statements.HEAD, {"sid": session_id}).one())
    params = []
    for message in messages:
        draft = append_draft(SessionEvent._new(session_id, message, None, None, None), 1 << 30)
        record, values = statement_values(draft, head, head_moves(appended_event(draft)))
        params.append(statement.params(values))
        head = LedgerHead.of(record)
    return statement.sql, params


def _append_layers(service: SessionService) -> Row:
    """Where one `append_message` spends its time: each layer but the statement timed alone,
    repeated as many times as appends, and the statement (its round trip and the server's work)
    as what is left of a whole append. Medians of interleaved rounds, as everywhere here."""
    session_id = service.create_session("bench", app_name="bench").id
    messages = payloads.messages(APPENDS_PER_ROUND)
    engine = service.ledger.engine  # type: ignore[attr-defined]  # the SQL ledger's, on PostgreSQL
    head = LedgerHead(1, "0" * 64, 0)
    drafts = [append_draft(SessionEvent._new(session_id, m, None, None, None), 1 << 30) for m in messages]

    connections = Autocommit(engine)  # as the ledger's own: a kept connection, switched once

    def connected() -> None:
        with connections():
            pass

    cases = {
        "append": lambda: [service.append_message(session_id, m) for m in messages],
        "draft": lambda: [
            append_draft(SessionEvent._new(session_id, m, None, None, None), 1 << 30) for m in messages
        ],
        "place": lambda: [
            ledger_row(head.place(session_id, d, 1), d.text, datetime.now(UTC)) for d in drafts
        ],
        "connection": lambda: [connected() for _ in messages],
    }
    try:
        medians = {name: seconds / APPENDS_PER_ROUND * 1e6 for name, seconds in interleaved(9, cases).items()}
    finally:
        connections.close()
    statement = medians["append"] - medians["draft"] - medians["place"] - medians["connection"]
    return Row(
        "  of which: event + checks + canonical JSON + content hash / chain place + row / "
        "connection / the statement (round trip, server)",
        f"{medians['draft']:.0f} / {medians['place']:.0f} / {medians['connection']:.0f} / {statement:.0f} µs",
        f"whole append {medians['append']:.0f} µs",
    )


def _rounds(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """One round's worth of items after the other."""
    return (items[start : start + APPENDS_PER_ROUND] for start in range(0, len(items), APPENDS_PER_ROUND))


def _analyze(conn: psycopg.Connection) -> None:
    """Planner statistics after a bulk load, as autovacuum would soon have them."""
    conn.execute("ANALYZE")
    conn.commit()


def _window_reads(service: SessionService, conn: psycopg.Connection) -> list[Row]:
    session_id = payloads.session_with(service, WINDOW_EVENTS)
    _analyze(conn)
    active = EventFilter.active()
    cases = {
        "raw": lambda: raw.select_window(conn, session_id),
        "events": lambda: service.get_events(session_id, active),
        "messages": lambda: service.get_messages(session_id),
    }
    assert {len(case()) for case in cases.values()} == {WINDOW_EVENTS}
    medians = interleaved(READ_ROUNDS, cases)
    return [
        Row(
            f"{name}, {WINDOW_EVENTS:,}-event session",
            report.duration(medians[key]),
            f"raw SELECT {report.duration(medians['raw'])}",
            medians[key] / medians["raw"],
            "<= 2x raw time",
            medians[key] <= 2 * medians["raw"],
        )
        for key, name in (("events", "get_events(active)"), ("messages", "get_messages"))
    ]


def _last_n(service: SessionService, conn: psycopg.Connection) -> list[Row]:
    short = payloads.session_with(service, WINDOW_EVENTS)
    loading: list[float] = []
    long = payloads.session_with(service, LONG_EVENTS, loading)
    _analyze(conn)
    last = EventFilter.last(LAST_N)
    cases = {"short": lambda: service.get_events(short, last), "long": lambda: service.get_events(long, last)}
    assert [len(case()) for case in cases.values()] == [LAST_N, LAST_N]
    medians = interleaved(LAST_N_ROUNDS, cases)
    ratio = medians["long"] / medians["short"]
    ingest, copy = LONG_EVENTS / sum(loading), copy_rate(conn)
    return [
        Row(
            f"get_events(last_n={LAST_N}), {LONG_EVENTS:,}-event session",
            report.duration(medians["long"]),
            f"{WINDOW_EVENTS:,} events {report.duration(medians['short'])}",
            ratio,
            "<= 1.5x (no growth)",
            ratio <= 1.5,
        ),
        Row(
            f"SessionService.ingest (loading that session), {payloads.LOAD_BATCH:,} events per transaction",
            report.rate(ingest, "events"),
            f"raw COPY, {payloads.LOAD_BATCH:,} rows per transaction {report.rate(copy, 'rows')}",
            ingest / copy,
            ">= 0.30 of COPY",
            ingest >= 0.3 * copy,
        ),
    ]


def copy_rate(conn: psycopg.Connection) -> float:
    """Rows per second of raw COPYs of `payloads.LOAD_BATCH` ledger rows each (a transaction each)."""
    rows = [raw.row_of(m, n) for n, m in enumerate(payloads.cycled(COPY_ROWS), 1)]
    size = payloads.LOAD_BATCH
    batches = [rows[start : start + size] for start in range(0, COPY_ROWS, size)]
    seconds = sum(timed(lambda batch=batch: raw.copy(conn, batch, "raw-copy")) for batch in batches)
    return COPY_ROWS / seconds


if __name__ == "__main__":
    report.main(run)
