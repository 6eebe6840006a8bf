"""Digests, incremental and parallel verify, and proofs on PostgreSQL, each against a same-run baseline.

- `verify --jobs 2` of a 100,000-event session against a raw sequential read of the same rows
  (psycopg, payloads decoded: `bench_audit`'s raw read);
- `verify --since` a digest, after 1,000 events ingested into ten of the ledger's sessions,
  against a raw read of those 1,000 rows (by global position). The ledger holds the 100,000-event
  session and 1,000-event sessions up to `SESSIONLEDGER_BENCH_DIGESTS_EVENTS` events in all
  (200,000 by default, to keep the run short; 1,000,000 is the issue's size);
- `prove` + `check-proof` of the last reply of the 100,000-event session against the same of a
  1,000-event session: the proof's size, and the time to check it (no database).
`SESSIONLEDGER_BENCH_DIGESTS_PARTS` names the parts to measure (`jobs,since,proofs` by default;
`since` alone on the 1,000,000-event ledger spends its time loading it, not measuring the rest).
The two sessions are compacted every 1,000 events as they are loaded, as a deployment's policy
would (a compaction record lists what it archived, and a proof carries the last one: in a session
never compacted, the window the model saw is the whole session, and so is its proof). Every
session is loaded through the batch ingest path (`SessionService.ingest`). Cases alternate round by
round; figures are medians.
"""

from __future__ import annotations

import os

import psycopg
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.compaction import EventCountTrigger, RecursiveSummarizationStrategy
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit.digest import take_digest
from sessionledger.infrastructure.audit.parallel import verify_parallel
from sessionledger.infrastructure.audit.proof import check_proof, make_proof
from sessionledger.infrastructure.audit.since import verify_since

from bench import payloads, report
from bench.bench_audit import raw_read
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import interleaved

LONG = 100_000
SHORT = 1_000
NEW = 1_000
LEDGER = int(os.environ.get("SESSIONLEDGER_BENCH_DIGESTS_EVENTS", "200000"))
ROUNDS = 3
PARTS = ("jobs", "since", "proofs")

_NEW_ROWS = """SELECT position, version, event_id, kind, occurred_at, recorded_at, event_type, branch,
    synthetic, payload, token_count, content_hash, prev_hash, row_hash
    FROM ledger WHERE global_position > %s ORDER BY global_position"""


class _Summarizer:
    """A fixed summary: the benchmark measures proofs, not a model."""

    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "they talked about many things"


def run() -> list[Row]:
    parts = _parts()
    with fresh_postgres() as url, open_service(url) as service, psycopg.connect(url) as conn:
        long_id = _compacted_session(service, LONG)
        short_id = _compacted_session(service, SHORT)
        others = [payloads.session_with(service, SHORT) for _ in range(max(10, (LEDGER - LONG) // SHORT - 1))]
        conn.execute("ANALYZE")
        conn.commit()
        rows = _jobs(service, conn, long_id) if "jobs" in parts else []
        if "since" in parts:
            rows += _since(service, conn, others[-10:])  # not the sessions whose proofs are compared
        if "proofs" in parts:
            rows += _proofs(service, long_id, short_id)
    return rows


def _parts() -> list[str]:
    """The parts `SESSIONLEDGER_BENCH_DIGESTS_PARTS` names (all by default)."""
    named = os.environ.get("SESSIONLEDGER_BENCH_DIGESTS_PARTS", ",".join(PARTS))
    parts = [part.strip() for part in named.split(",") if part.strip()]
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        raise ValueError(
            f"SESSIONLEDGER_BENCH_DIGESTS_PARTS: name some of {', '.join(PARTS)} (not {named!r})"
        )
    return parts


def _compacted_session(service: SessionService, events: int) -> str:
    """A session of `events` ShareGPT messages, compacted after every `SHORT` of them (four kept)."""
    session_id = service.create_session("bench", app_name="bench").id
    found = payloads.cycled(events)
    strategy = RecursiveSummarizationStrategy(_Summarizer(), max_events_to_keep=4)
    for start in range(0, events, SHORT):
        service.ingest([SessionEvent(session_id=session_id, message=m) for m in found[start : start + SHORT]])
        service.compact(session_id, EventCountTrigger(1), strategy)
    return session_id


def _jobs(service: SessionService, conn: psycopg.Connection, session_id: str) -> list[Row]:
    def verified() -> None:
        [result] = verify_parallel(service, 2, [session_id])
        assert result.ok, result.findings

    medians = interleaved(ROUNDS, {"raw": lambda: raw_read(conn, session_id), "jobs": verified})
    ratio = medians["raw"] / medians["jobs"]
    records = len(service.records(session_id))
    return [
        Row(
            f"verify --jobs 2, {LONG:,}-event session",
            report.rate(records / medians["jobs"], "events"),
            f"raw read {report.rate(records / medians['raw'], 'events')}",
            ratio,
            ">= 0.9 of raw rate",
            ratio >= 0.9,
        )
    ]


def _since(service: SessionService, conn: psycopg.Connection, sessions: list[str]) -> list[Row]:
    digest = take_digest(service.ledger)
    fresh = payloads.cycled(NEW)
    per_session = NEW // len(sessions)
    for i, session_id in enumerate(sessions):
        batch = fresh[i * per_session : (i + 1) * per_session]
        service.ingest([SessionEvent(session_id=session_id, message=message) for message in batch])
    conn.execute("ANALYZE")
    conn.commit()

    def checked() -> None:
        found = verify_since(service.ledger, digest)
        assert found.ok and len(found.results) == len(sessions), found.results

    def new_rows() -> None:
        assert len(conn.execute(_NEW_ROWS, (digest.global_position,)).fetchall()) == NEW
        conn.commit()

    medians = interleaved(ROUNDS * 3, {"raw": new_rows, "since": checked})
    ratio = medians["since"] / medians["raw"]
    return [
        Row(
            f"verify --since, {NEW:,} new events on a {LEDGER:,}-event ledger "
            f"({len(digest.sessions):,} sessions)",
            report.duration(medians["since"]),
            f"raw read of the new rows {report.duration(medians['raw'])}",
            ratio,
            "< 2x raw time",
            ratio < 2,
        )
    ]


def _proofs(service: SessionService, long_id: str, short_id: str) -> list[Row]:
    texts = {}
    for name, session_id in (("long", long_id), ("short", short_id)):
        for turn in range(10):
            service.append_message(session_id, UserMessage(f"after the compaction {turn}"))
        records = service.records(session_id)
        texts[name] = make_proof(records, records[-1].event_id or "")
    digest = take_digest(service.ledger)
    medians = interleaved(
        ROUNDS * 5, {name: lambda text=text: check_proof(text, digest) for name, text in texts.items()}
    )
    size = len(texts["long"]) / len(texts["short"])
    check = medians["long"] / medians["short"]
    return [
        Row(
            f"proof size, a reply in a {LONG:,}-event session",
            f"{len(texts['long']):,} bytes",
            f"{SHORT:,}-event session {len(texts['short']):,} bytes",
            size,
            "<= 2x",
            size <= 2,
        ),
        Row(
            f"check-proof time, a reply in a {LONG:,}-event session",
            report.duration(medians["long"]),
            f"{SHORT:,}-event session {report.duration(medians['short'])}",
            check,
            "<= 2x",
            check <= 2,
        ),
    ]


if __name__ == "__main__":
    report.main(run)
