"""Audit throughput on PostgreSQL: verify and replay of a 100,000-event
session against a raw sequential read of the same rows.

- raw: plain psycopg, `SELECT` of every column the chain covers, by position, payloads decoded to
  Python objects by psycopg (replay needs them decoded, so the audit must decode them too);
- floor: the same SELECT in psycopg's binary protocol with each payload left as its bytes (nothing
  decoded): what merely reading the rows costs here, a bound no verify that reads them can beat;
- verify: the whole check of `infrastructure.audit.verify` (records and head in one snapshot,
  content and row hashes, links and positions, then the stored window, state, session row and
  stats against `domain.replay.replay`); the session was never compacted, so its stored window
  holds all 100,000 events and is read and compared too;
- verify, chain only: the records read and the hash chain checked (no replay, no stored window);
- replay: `infrastructure.audit.replay`, the window rebuilt from the ledger alone.
The session is loaded through the batch ingest path (`SessionService.ingest`). Cases alternate
round by round; figures are medians.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import Format
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import replay, verify
from sessionledger.infrastructure.audit.chain import first_break
from sessionledger.infrastructure.audit.reader import read_snapshot

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved

EVENTS = 100_000
ROUNDS = 3
TARGET = 100_000
"""events/s that verify must reach."""

_RAW = """SELECT position, version, event_id, kind, occurred_at, recorded_at, event_type, branch,
    synthetic, payload, token_count, content_hash, prev_hash, row_hash
    FROM ledger WHERE session_id = %s ORDER BY position"""


def run() -> list[Row]:
    with fresh_postgres() as url, open_service(url) as service, psycopg.connect(url) as conn:
        loading: list[float] = []
        session_id = payloads.session_with(service, EVENTS, loading)
        conn.execute("ANALYZE")
        conn.commit()
        records = EVENTS + 1  # the events and the session's created record
        cases = {
            "raw": lambda: raw_read(conn, session_id),
            "floor": lambda: _floor_read(conn, session_id),
            "verify": lambda: _verified(service, session_id),
            "chain": lambda: _chain(service, session_id),
            "replay": lambda: replay(service, session_id),
        }
        assert len(raw_read(conn, session_id)) == records
        assert len(replay(service, session_id).window) == EVENTS
        medians = interleaved(ROUNDS, cases)
    rates = {name: records / seconds for name, seconds in medians.items()}
    raw = f"raw read {report.rate(rates['raw'], 'events')}"
    return [
        Row(
            f"raw sequential read, {EVENTS:,}-event session (psycopg, JSON decoded)",
            report.rate(rates["raw"], "events"),
        ),
        Row(
            "  floor: the same read, binary protocol, payloads left as bytes",
            report.rate(rates["floor"], "events"),
            raw,
            rates["floor"] / rates["raw"],
        ),
        Row(
            "verify (chain + stored window/state vs replay)",
            report.rate(rates["verify"], "events"),
            raw,
            rates["verify"] / rates["raw"],
            f">= {TARGET:,} events/s",
            rates["verify"] >= TARGET,
        ),
        Row("verify, chain only", report.rate(rates["chain"], "events"), raw, rates["chain"] / rates["raw"]),
        Row(
            "replay (window rebuilt from the ledger)",
            report.rate(rates["replay"], "events"),
            raw,
            rates["replay"] / rates["raw"],
        ),
        Row(
            f"batch ingest (loading the session), {payloads.LOAD_BATCH:,} events per transaction",
            report.rate(EVENTS / sum(loading), "events"),
        ),
    ]


def raw_read(conn: psycopg.Connection, session_id: str) -> list[tuple[object, ...]]:
    rows = conn.execute(_RAW, (session_id,)).fetchall()
    conn.commit()
    return rows


class _Bytes(Loader):
    format = Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)


def _floor_read(conn: psycopg.Connection, session_id: str) -> list[tuple[object, ...]]:
    cursor = conn.cursor(binary=True)
    cursor.adapters.register_loader("json", _Bytes)
    rows = cursor.execute(_RAW, (session_id,)).fetchall()
    conn.commit()
    return rows


def _verified(service: SessionService, session_id: str) -> None:
    result = verify(service, session_id)
    assert result.ok, result.findings


def _chain(service: SessionService, session_id: str) -> None:
    snapshot = read_snapshot(service.ledger, session_id)
    assert first_break(snapshot.records, snapshot.digests, snapshot.head) is None


if __name__ == "__main__":
    report.main(run)
