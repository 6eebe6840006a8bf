"""The ledger on MariaDB (or MySQL) against raw PyMySQL, its own driver, on the same database; and
google-adk's `DatabaseSessionService` beside the ADK adapter on the same server.

- `append_message`, one event per call, against one autocommitted raw INSERT of the same row
  into a copy of the ledger table (`CREATE TABLE ... LIKE`: same columns, keys and collation);
- the active window of a 1,000-event session (`get_messages`) against a raw SELECT of those rows
  with each payload decoded (the standard library's json, as psycopg decodes PostgreSQL's);
- `SessionService.ingest` of 2,000-event batches against multi-row INSERTs of the same 2,000 rows
  per transaction (PyMySQL's executemany; `LOAD DATA LOCAL INFILE` needs `local_infile` on
  both ends, which servers ship off);
- ADK `append_event`, sequential, through `LedgerSessionService` against `DatabaseSessionService`,
  each in a fresh database. The peer runs on asyncmy (`mysql+asyncmy://`), the driver of the
  ledger's own loop appends (`loop_mysql.py`), and the faster of SQLAlchemy's two asyncio drivers
  for it: its append took 2.8-3.3 ms against 3.2-3.7 ms on aiomysql (PyMySQL's Python code under
  asyncio), in five runs alternating rounds of both in one process.
Cases alternate round by round; figures are medians.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from sessionledger.domain import SessionEvent
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.adk import LedgerSessionService

from bench import payloads, raw, raw_mariadb, report
from bench.bench_adapters_adk import adk_events, append_rounds
from bench.database import fresh_mariadb
from bench.report import Row
from bench.timing import alternating, interleaved

APPEND_ROUNDS, APPENDS_PER_ROUND = 30, 50
READ_ROUNDS = 30
WINDOW_EVENTS = 1_000
INGEST_ROUNDS = 6
ADK_ROUNDS, ADK_APPENDS_PER_ROUND = 20, 20

T = TypeVar("T")


def run() -> list[Row]:
    with fresh_mariadb() as url, open_service(url) as service:
        autocommit = raw_mariadb.connect(url, autocommit=True)
        committed = raw_mariadb.connect(url, autocommit=False)
        try:
            raw_mariadb.create_table(autocommit)
            return [
                _appends(service, autocommit),
                _window_read(service, autocommit),
                _ingest(service, committed),
                _adk_appends(),
            ]
        finally:
            autocommit.close()
            committed.close()


def _rounds(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    return (items[start : start + size] for start in range(0, len(items), size))


def _appends(service: SessionService, conn: Any) -> Row:
    messages = payloads.messages(APPEND_ROUNDS * APPENDS_PER_ROUND)
    session_id = service.create_session("bench", app_name="bench").id
    ledger_batches = _rounds(messages, APPENDS_PER_ROUND)
    raw_batches = _rounds([raw.row_of(m, n + 1) for n, m in enumerate(messages)], APPENDS_PER_ROUND)
    cases = {
        "ledger": lambda: [service.append_message(session_id, m) for m in next(ledger_batches)],
        "raw": lambda: [raw_mariadb.insert(conn, row) for row in next(raw_batches)],
    }
    for case in cases.values():  # warm up: pooled connections, caches
        case()
    medians = interleaved(APPEND_ROUNDS - 1, cases)
    rates = {name: APPENDS_PER_ROUND / seconds for name, seconds in medians.items()}
    ratio = rates["ledger"] / rates["raw"]
    return Row(
        "append_message, sequential, against one autocommitted raw INSERT",
        report.rate(rates["ledger"], "events"),
        f"raw autocommit INSERT {report.rate(rates['raw'], 'events')}",
        ratio,
        ">= 0.70 of raw rate",
        ratio >= 0.7,
    )


def _window_read(service: SessionService, conn: Any) -> Row:
    session_id = payloads.session_with(service, WINDOW_EVENTS)
    cases: dict[str, Callable[[], Any]] = {
        "raw": lambda: raw_mariadb.select_window(conn, session_id),
        "messages": lambda: service.get_messages(session_id),
    }
    assert {len(case()) for case in cases.values()} == {WINDOW_EVENTS}
    medians = interleaved(READ_ROUNDS, cases)
    ratio = medians["messages"] / medians["raw"]
    return Row(
        f"get_messages, {WINDOW_EVENTS:,}-event session",
        report.duration(medians["messages"]),
        f"raw SELECT {report.duration(medians['raw'])}",
        ratio,
        "<= 1.2x raw time",
        ratio <= 1.2,
    )


def _ingest(service: SessionService, conn: Any) -> Row:
    size = payloads.LOAD_BATCH
    messages = payloads.cycled(size)
    rows = [raw.row_of(m, n) for n, m in enumerate(messages, 1)]
    sessions = iter(range(2 * INGEST_ROUNDS + 2))

    def ingest() -> None:
        session_id = service.create_session("bench", app_name="bench").id
        service.ingest([SessionEvent(session_id=session_id, message=m) for m in messages])

    cases = {
        "ledger": ingest,
        "raw": lambda: raw_mariadb.insert_many(conn, rows, f"raw-{next(sessions)}"),
    }
    for case in cases.values():
        case()
    medians = interleaved(INGEST_ROUNDS, cases)
    rates = {name: size / seconds for name, seconds in medians.items()}
    ratio = rates["ledger"] / rates["raw"]
    return Row(
        f"SessionService.ingest, {size:,} events per transaction",
        report.rate(rates["ledger"], "events"),
        f"raw multi-row INSERT, {size:,} rows per transaction {report.rate(rates['raw'], 'rows')}",
        ratio,
        ">= 0.30 of raw rate",
        ratio >= 0.3,
    )


def _adk_appends() -> Row:
    loop = asyncio.new_event_loop()
    try:
        with fresh_mariadb() as ledger_url, fresh_mariadb() as peer_url:
            ours = LedgerSessionService(ledger_url)
            theirs = DatabaseSessionService(peer_url.replace("+pymysql://", "+asyncmy://", 1))
            try:
                services: dict[str, BaseSessionService] = {"ledger": ours, "adk": theirs}
                return _adk_rate(loop, services)
            finally:
                loop.run_until_complete(ours.close())
                loop.run_until_complete(theirs.close())
    finally:
        loop.close()


def _adk_rate(loop: asyncio.AbstractEventLoop, services: dict[str, BaseSessionService]) -> Row:
    total = (ADK_ROUNDS + 1) * ADK_APPENDS_PER_ROUND
    cases = {
        name: append_rounds(loop, service, adk_events(total), ADK_APPENDS_PER_ROUND)
        for name, service in services.items()
    }
    for call in cases.values():
        call()
    medians = alternating(ADK_ROUNDS, cases)
    rates = {name: ADK_APPENDS_PER_ROUND / seconds for name, seconds in medians.items()}
    ratio = rates["ledger"] / rates["adk"]
    return Row(
        "ADK append_event, sequential (LedgerSessionService)",
        report.rate(rates["ledger"], "events"),
        f"google-adk DatabaseSessionService {report.rate(rates['adk'], 'events')}",
        ratio,
        ">= 5x its rate",
        ratio >= 5,
    )


if __name__ == "__main__":
    report.main(run)
