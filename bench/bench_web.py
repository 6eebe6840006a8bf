"""The audit page's server time for a 10,000-event session on PostgreSQL, page by page.

Each page is asked for in process (Starlette's TestClient: no network, the whole application's
work, routing, token check, reads and rendering, is the time measured), as HTML and as JSON, by
its owner's bearer token. The session holds 10,000 ShareGPT messages, a compaction that archived
all but its last 50 events, and 10 later replies. Baselines of the same run: a raw sequential read
of the whole session (`bench_audit.raw_read`, psycopg, JSON decoded) and `GET /login` (the
application with no ledger read: routing, the template, the client). The target: every page
answers in under 300 ms. The list, the timeline and a compaction's page read a page of records;
the window, what the model saw and verify replay or check the whole session (see docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import psycopg
from fastapi.testclient import TestClient
from sessionledger.domain import AssistantMessage
from sessionledger.domain.access import Grant, issue
from sessionledger.domain.compaction import EventCountTrigger, SlidingWindowStrategy
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.web import audit_app

from bench import payloads, report
from bench.bench_audit import raw_read
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved

EVENTS = 10_000
KEPT = 50
ROUNDS = 5
TARGET_MS = 300.0


def run() -> list[Row]:
    with (
        fresh_postgres() as url,
        open_storage(Settings(database_url=url)) as storage,
        psycopg.connect(url) as conn,
    ):
        service = storage.service
        session_id = payloads.session_with(service, EVENTS)
        assert service.compact(
            session_id, EventCountTrigger(1), SlidingWindowStrategy(max_events=KEPT)
        ).archived
        for i in range(10):
            reply = service.append_message(session_id, AssistantMessage(f"later reply {i}")).id
        records = service.records(session_id)
        compaction = next(r.position for r in records if r.kind is Kind.COMPACTION)
        first_event = next(r.event_id for r in records if r.kind is Kind.EVENT)
        token, stored = issue(Grant("bench"), datetime.now(UTC))
        storage.access_tokens.add(stored)
        conn.execute("ANALYZE")
        conn.commit()
        client = TestClient(audit_app(service, storage.access_tokens, database=url))
        auth = {"Authorization": f"Bearer {token}"}
        base = f"/sessions/{session_id}"
        last_page = -(-len(records) // 100)
        pages = {
            "sessions list": "/",
            "timeline, first page": base,
            "timeline, last page (the compaction)": f"{base}?page={last_page}",
            "timeline, a middle page": f"{base}?page={last_page // 2}",
            "compaction: what it archived, first page": f"{base}/records/{compaction}",
            "active window, now": f"{base}/window",
            "what the model saw: the last reply": f"{base}/events/{reply}",
            "what the model saw: the first event": f"{base}/events/{first_event}",
            "verify (whole session)": f"{base}/verify",
        }
        cases: dict[str, Callable[[], object]] = {
            "raw": lambda: raw_read(conn, session_id),
            "login": lambda: _get(client, "/login", {}),
        }
        for name, path in pages.items():
            cases[name] = lambda path=path: _get(client, path, auth)
            cases[name + " (JSON)"] = lambda path=path: _get(
                client, path, {**auth, "Accept": "application/json"}
            )
        medians = interleaved(ROUNDS, cases)
    raw = medians["raw"]
    rows = [
        Row(f"raw sequential read of the {len(records):,}-record session (psycopg)", report.duration(raw)),
        Row(
            "GET /login (no ledger read)",
            report.duration(medians["login"]),
            report.duration(raw),
            medians["login"] / raw,
        ),
    ]
    for name in cases:
        if name in ("raw", "login"):
            continue
        seconds = medians[name]
        rows.append(
            Row(
                name,
                report.duration(seconds),
                f"raw read {report.duration(raw)}",
                seconds / raw,
                f"< {TARGET_MS:.0f} ms",
                seconds * 1000 < TARGET_MS,
            )
        )
    return rows


def _get(client: TestClient, path: str, headers: dict[str, str]) -> None:
    answer = client.get(path, headers=headers)
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])


if __name__ == "__main__":
    report.main(run)
