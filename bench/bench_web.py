"""The audit page's server time for a 10,000-event session on PostgreSQL and SQLite, page by page.

Each page is asked for in process (Starlette's TestClient: no network, the whole application's
work, routing, token check, reads and rendering, is the time measured), as HTML and as JSON, by
its owner's bearer token. The session holds 10,000 ShareGPT messages, a compaction that archived
all but its last 50 events, and 10 later replies; a digest of the ledger was taken before those
replies and lies in the page's digest directory. Baselines of the same run: a raw sequential read
of the whole session (psycopg, or sqlite3, JSON decoded) and `GET /login` (the application with no
ledger read: routing, the template, the client). The target: every page answers in under 300 ms.
The list, the timeline and a compaction's page read a page of records; the window and what the
model saw read the window's records from the last compaction on; verify checks the records written
since the digest; "verify all" (the whole chain and the stored window replayed) has no target: the
page says it takes longer (see docs/benchmarks.md).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import orjson
import psycopg
from fastapi.testclient import TestClient
from sessionledger.domain import AssistantMessage
from sessionledger.domain.access import Grant, issue
from sessionledger.domain.compaction import EventCountTrigger, SlidingWindowStrategy
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.audit.digest import take_digest, write_digest
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
VERIFY_ALL = "verify all (whole session, on request)"


def run() -> list[Row]:
    rows: list[Row] = []
    with fresh_postgres() as url, psycopg.connect(url) as conn:
        rows += _measured("PostgreSQL", url, lambda sid: raw_read(conn, sid), lambda: _analyze(conn))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.db"
        with closing(sqlite3.connect(path)) as lite:
            rows += _measured(
                "SQLite", f"sqlite:///{path}", lambda sid: _sqlite_read(lite, sid), lambda: None
            )
    return rows


def _measured(backend: str, url: str, raw: Callable[[str], object], analyze: Callable[[], None]) -> list[Row]:
    """Every page's median server time on one backend, beside the raw read of the session."""
    with open_storage(Settings(database_url=url)) as storage, tempfile.TemporaryDirectory() as digests:
        service = storage.service
        session_id = payloads.session_with(service, EVENTS)
        assert service.compact(
            session_id, EventCountTrigger(1), SlidingWindowStrategy(max_events=KEPT)
        ).archived
        write_digest(take_digest(service.ledger), Path(digests) / "digest-1.json")
        for i in range(10):
            reply = service.append_message(session_id, AssistantMessage(f"later reply {i}")).id
        records = service.records(session_id)
        compaction = next(r.position for r in records if r.kind is Kind.COMPACTION)
        first_event = next(r.event_id for r in records if r.kind is Kind.EVENT)
        token, stored = issue(Grant("bench"), datetime.now(UTC))
        storage.access_tokens.add(stored)
        analyze()
        client = TestClient(audit_app(service, storage.access_tokens, database=url, digest_dir=Path(digests)))
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
            "active window, version 5,000 (before the compaction)": f"{base}/window?version=5000",
            "what the model saw: the last reply": f"{base}/events/{reply}",
            "what the model saw: the first event": f"{base}/events/{first_event}",
            "verify (since the latest digest)": f"{base}/verify",
            VERIFY_ALL: f"{base}/verify?all=1",
        }
        cases: dict[str, Callable[[], object]] = {
            "raw": lambda: raw(session_id),
            "login": lambda: _get(client, "/login", {}),
        }
        for name, path in pages.items():
            cases[name] = lambda path=path: _get(client, path, auth)
            cases[name + " (JSON)"] = lambda path=path: _get(
                client, path, {**auth, "Accept": "application/json"}
            )
        medians = interleaved(ROUNDS, cases)
    raw_s = medians["raw"]
    rows = [
        Row(
            f"{backend}: raw sequential read of the {len(records):,}-record session",
            report.duration(raw_s),
        ),
        Row(
            f"{backend}: GET /login (no ledger read)",
            report.duration(medians["login"]),
            report.duration(raw_s),
            medians["login"] / raw_s,
        ),
    ]
    for name in cases:
        if name in ("raw", "login"):
            continue
        seconds = medians[name]
        targeted = not name.startswith(VERIFY_ALL)
        rows.append(
            Row(
                f"{backend}: {name}",
                report.duration(seconds),
                f"raw read {report.duration(raw_s)}",
                seconds / raw_s,
                f"< {TARGET_MS:.0f} ms" if targeted else "-",
                seconds * 1000 < TARGET_MS if targeted else None,
            )
        )
    return rows


def _analyze(conn: psycopg.Connection) -> None:
    conn.execute("ANALYZE")
    conn.commit()


_SQLITE_RAW = """SELECT position, version, event_id, kind, occurred_at, recorded_at, event_type, branch,
    synthetic, payload, token_count, content_hash, prev_hash, row_hash
    FROM ledger WHERE session_id = ? ORDER BY position"""


def _sqlite_read(conn: sqlite3.Connection, session_id: str) -> list[tuple[object, ...]]:
    """The SQLite twin of `bench_audit.raw_read`: every column the chain covers, payloads decoded."""
    return [(*row[:9], orjson.loads(row[9]), *row[10:]) for row in conn.execute(_SQLITE_RAW, (session_id,))]


def _get(client: TestClient, path: str, headers: dict[str, str]) -> None:
    answer = client.get(path, headers=headers)
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])


if __name__ == "__main__":
    report.main(run)
