"""Tampering with ledger rows directly in SQL: `verify` catches each kind and names it.

On PostgreSQL the `ledger_guard` trigger refuses such changes, so the tests do what a superuser
would: `SET LOCAL session_replication_role = replica` switches triggers off for the transaction.
SQLite has no guard. Each test tampers with a fresh session holding appends, a compaction with a
summary, and a rewind, then checks the first finding's kind and position.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sessionledger.domain import AssistantMessage, EventFilter, SessionEvent, UserMessage
from sessionledger.domain.compaction import RecursiveSummarizationStrategy
from sessionledger.domain.hashing import canonical, row_hash, sha256_hex
from sessionledger.domain.records import Kind, LedgerRecord, event_draft
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import verify, verify_all
from sessionledger.infrastructure.audit.parallel import verify_parallel

from tests.conftest import SQL_BACKENDS, sql_url
from tests.fakes.compaction import Always


class FixedSummarizer:
    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "they talked about questions and answers"


MARIADB_GUARD = importlib.import_module(
    "sessionledger.infrastructure.ledger.migrations.versions.0001_initial"
).MYSQL_LEDGER_GUARD
"""MariaDB's ledger_guard triggers, as the schema creates them."""


@dataclass
class Ledger:
    """A session to tamper with, and a way to run SQL on its database with the guard off."""

    service: SessionService
    session_id: str
    backend: str

    @property
    def postgres(self) -> bool:
        return self.backend == "postgres"

    @property
    def guarded(self) -> bool:
        """Whether the database itself refuses edits of ledger rows (SQLite has no ledger_guard)."""
        return self.backend != "sqlite"

    def sql(self, statement: str, **params: Any) -> None:
        """`statement` run as someone who can switch the guard off: on PostgreSQL for the
        transaction (replica role), on MariaDB by dropping its triggers and making them again."""
        engine = self.service.ledger.engine  # type: ignore[attr-defined]
        with engine.begin() as conn:
            if self.postgres:
                conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
            if self.backend == "mariadb":
                conn.exec_driver_sql("DROP TRIGGER ledger_guard")
                conn.exec_driver_sql("DROP TRIGGER ledger_guard_delete")
            try:
                conn.execute(sa.text(statement), {"sid": self.session_id, **params})
            finally:
                if self.backend == "mariadb":
                    for trigger in MARIADB_GUARD:
                        conn.exec_driver_sql(trigger)

    def json(self, name: str) -> str:
        """A bind parameter holding JSON text, as the payload column takes it."""
        return f"CAST(:{name} AS json)" if self.postgres else f":{name}"

    def records(self) -> list[LedgerRecord]:
        return self.service.records(self.session_id)

    def event_positions(self) -> list[int]:
        return [r.position for r in self.records() if r.kind is Kind.EVENT]

    def last(self) -> int:
        return self.records()[-1].position

    def renumber(self, from_position: int, shift: int) -> None:
        """Move every row at or after `from_position` by `shift` (in two steps: positions are unique)."""
        self.sql(
            "UPDATE ledger SET position = -(position + :shift) WHERE session_id = :sid AND position >= :p",
            p=from_position,
            shift=shift,
        )
        self.sql("UPDATE ledger SET position = -position WHERE session_id = :sid AND position < 0")

    def insert(self, record: LedgerRecord, text: str) -> None:
        self.sql(
            "INSERT INTO ledger (session_id, position, version, event_id, kind, occurred_at, recorded_at,"
            " event_type, branch, synthetic, payload, token_count, content_hash, prev_hash, row_hash)"
            " VALUES (:sid, :position, :version, :event_id, :kind, :occurred_at, :occurred_at, :event_type,"
            f" NULL, :synthetic, {self.json('payload')}, NULL, :content_hash, :prev_hash, :row_hash)",
            position=record.position,
            version=record.version,
            event_id=record.event_id,
            kind=str(record.kind),
            occurred_at=record.occurred_at,
            event_type=record.event_type,
            synthetic=record.synthetic,
            payload=text,
            content_hash=record.content_hash,
            prev_hash=record.prev_hash,
            row_hash=record.row_hash,
        )


def build_session(service: SessionService) -> str:
    session_id = service.create_session("auditor", app_name="tamper", state={"mood": "calm"}).id
    for turn in range(6):
        service.append_event(
            SessionEvent(
                session_id=session_id, message=UserMessage(f"question {turn}"), invocation_id=f"inv{turn}"
            )
        )
        service.append_message(session_id, AssistantMessage(f"answer {turn}"), state_delta={"turn": turn})
    service.compact(
        session_id, Always(), RecursiveSummarizationStrategy(FixedSummarizer(), max_events_to_keep=4)
    )
    for turn in range(6, 9):
        service.append_event(
            SessionEvent(
                session_id=session_id, message=UserMessage(f"question {turn}"), invocation_id=f"inv{turn}"
            )
        )
        service.append_message(session_id, AssistantMessage(f"answer {turn}"))
    service.rewind(session_id, "inv8")
    service.append_message(session_id, UserMessage("after the rewind"))
    return session_id


def open_ledger(request: pytest.FixtureRequest, shared: bool = True) -> Iterator[Ledger]:
    """`build_session`'s session on the backend `request.param` names, in the run's shared
    database or (`shared=False`, where the whole ledger is judged) a fresh one."""
    with open_service(sql_url(request, request.param, shared=shared)) as service:
        yield Ledger(service, build_session(service), request.param)


@pytest.fixture(params=SQL_BACKENDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    yield from open_ledger(request)


@pytest.fixture(params=SQL_BACKENDS)
def whole_ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """`ledger` in a fresh database, for a test that verifies every session (in the shared one,
    every session the run has written so far)."""
    yield from open_ledger(request, shared=False)


def first_finding(ledger: Ledger) -> tuple[str, int | None]:
    result = verify(ledger.service, ledger.session_id)
    assert not result.ok
    assert result.first is not None
    return str(result.first.kind), result.first.position


def test_an_untouched_ledger_verifies(ledger: Ledger) -> None:
    result = verify(ledger.service, ledger.session_id)
    assert result.ok, result.findings
    kinds = {r.kind for r in ledger.records()}
    assert {Kind.COMPACTION, Kind.REWIND} <= kinds


def test_the_guard_refuses_the_same_edit_without_the_bypass(ledger: Ledger) -> None:
    if not ledger.guarded:
        pytest.skip("SQLite has no ledger_guard trigger")
    with pytest.raises(sa.exc.DBAPIError, match="append-only"), ledger.service.ledger.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(sa.text("DELETE FROM ledger WHERE session_id = :sid"), {"sid": ledger.session_id})


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE ledger SET event_type = 'system' WHERE session_id = :sid",
        "UPDATE ledger SET payload = NULL WHERE session_id = :sid",  # an erasure that named no session
        "UPDATE ledger SET token_count = 1, kind = 'event' WHERE session_id = :sid AND kind = 'created'",
    ],
)
def test_the_guard_refuses_an_edit_of_a_row(ledger: Ledger, edit: str) -> None:
    if not ledger.guarded:
        pytest.skip("SQLite has no ledger_guard trigger")
    before = ledger.records()
    with pytest.raises(sa.exc.DBAPIError, match="append-only"), ledger.service.ledger.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(sa.text(edit), {"sid": ledger.session_id})
    assert ledger.records() == before


def test_an_edited_payload(ledger: Ledger) -> None:
    p = ledger.event_positions()[2]
    record = ledger.records()[p - 1]
    payload = dict(record.payload or {})
    payload["message"] = {**payload["message"], "text": "I never said that"}
    ledger.sql(
        f"UPDATE ledger SET payload = {ledger.json('t')} WHERE session_id = :sid AND position = :p",
        t=canonical(payload),
        p=p,
    )
    assert first_finding(ledger) == ("edited", p)


def test_an_edited_header(ledger: Ledger) -> None:
    p = ledger.event_positions()[3]
    moved = ledger.records()[p - 1].occurred_at - timedelta(hours=1)
    ledger.sql("UPDATE ledger SET occurred_at = :t WHERE session_id = :sid AND position = :p", t=moved, p=p)
    assert first_finding(ledger) == ("edited", p)


def test_an_edited_search_column(ledger: Ledger) -> None:
    p = ledger.event_positions()[1]
    ledger.sql("UPDATE ledger SET branch = 'elsewhere' WHERE session_id = :sid AND position = :p", p=p)
    assert first_finding(ledger) == ("edited", p)


def test_a_row_rewritten_with_fresh_hashes(ledger: Ledger) -> None:
    """The editor recomputes the row's own hashes: the next row still names the old one."""
    p = ledger.event_positions()[2]
    record = ledger.records()[p - 1]
    payload = dict(record.payload or {})
    payload["message"] = {**payload["message"], "text": "rewritten"}
    text = canonical(payload)
    content = sha256_hex(text)
    new_hash = row_hash(
        record.prev_hash,
        record.session_id,
        p,
        record.version,
        record.event_id,
        record.kind,
        record.occurred_at,
        content,
    )
    ledger.sql(
        f"UPDATE ledger SET payload = {ledger.json('t')}, content_hash = :c, row_hash = :h"
        " WHERE session_id = :sid AND position = :p",
        t=text,
        c=content,
        h=new_hash,
        p=p,
    )
    assert first_finding(ledger) == ("edited", p)


def test_an_erased_payload_in_a_live_session(ledger: Ledger) -> None:
    p = ledger.event_positions()[0]
    ledger.sql("UPDATE ledger SET payload = NULL WHERE session_id = :sid AND position = :p", p=p)
    assert first_finding(ledger) == ("edited", p)


def test_a_deleted_row(ledger: Ledger) -> None:
    p = ledger.event_positions()[4]
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid AND position = :p", p=p)
    assert first_finding(ledger) == ("deleted", p)


def test_a_deleted_row_with_the_rest_renumbered(ledger: Ledger) -> None:
    p = ledger.event_positions()[4]
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid AND position = :p", p=p)
    ledger.renumber(p + 1, -1)
    assert first_finding(ledger) == ("deleted", p)


def test_the_last_row_deleted(ledger: Ledger) -> None:
    n = ledger.last()
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid AND position = :p", p=n)
    assert first_finding(ledger) == ("deleted", n)


def test_two_rows_swapped(ledger: Ledger) -> None:
    p = ledger.event_positions()[3]
    ledger.sql("UPDATE ledger SET position = -1 WHERE session_id = :sid AND position = :p", p=p)
    ledger.sql("UPDATE ledger SET position = :p WHERE session_id = :sid AND position = :q", p=p, q=p + 1)
    ledger.sql("UPDATE ledger SET position = :q WHERE session_id = :sid AND position = -1", q=p + 1)
    assert first_finding(ledger) == ("reordered", p)


def test_a_row_moved_to_the_end(ledger: Ledger) -> None:
    p, n = ledger.event_positions()[1], ledger.last()
    ledger.sql("UPDATE ledger SET position = -1000 WHERE session_id = :sid AND position = :p", p=p)
    ledger.renumber(p + 1, -1)  # flips the parked row to +1000 as well
    ledger.sql("UPDATE ledger SET position = :n WHERE session_id = :sid AND position = 1000", n=n)
    assert first_finding(ledger) == ("reordered", p)


def test_the_last_row_moved_up(ledger: Ledger) -> None:
    p, n = ledger.event_positions()[2], ledger.last()
    ledger.sql("UPDATE ledger SET position = -1000 WHERE session_id = :sid AND position = :n", n=n)
    ledger.renumber(p, 1)
    ledger.sql("UPDATE ledger SET position = :p WHERE session_id = :sid AND position = 1000", p=p)
    assert first_finding(ledger) == ("reordered", p)


def forged(
    ledger: Ledger, position: int, prev_hash: str, text: str = "a forged line"
) -> tuple[LedgerRecord, str]:
    """A record made with the ledger's own rules, as someone who knows them would forge it."""
    event = SessionEvent(session_id=ledger.session_id, message=AssistantMessage(text))
    draft = event_draft(event)
    version = ledger.records()[position - 2].version + 1
    return draft.place(ledger.session_id, position, version, prev_hash), draft.text


def test_a_row_appended_past_the_head_with_valid_hashes(ledger: Ledger) -> None:
    last = ledger.records()[-1]
    record, text = forged(ledger, last.position + 1, last.row_hash)
    ledger.insert(record, text)
    assert first_finding(ledger) == ("inserted", last.position + 1)


def test_a_row_inserted_in_the_middle(ledger: Ledger) -> None:
    p = ledger.event_positions()[3]
    before = ledger.records()[p - 2]
    ledger.renumber(p, 1)
    record, text = forged(ledger, p, before.row_hash)
    ledger.insert(record, text)
    assert first_finding(ledger) == ("inserted", p)


def test_a_garbage_row_inserted_in_the_middle(ledger: Ledger) -> None:
    p = ledger.event_positions()[3]
    ledger.renumber(p, 1)
    record, text = forged(ledger, p, "f" * 64)
    ledger.insert(record, text)
    assert first_finding(ledger) == ("inserted", p)


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        ('UPDATE sessions SET state = \'{"mood": "angry"}\' WHERE id = :sid', "state"),
        ('UPDATE sessions SET metadata = \'{"owner": "someone else"}\' WHERE id = :sid', "session"),
        ("DELETE FROM window_slots WHERE session_id = :sid AND ordinal = 0", "window"),
        ("UPDATE sessions SET window_bytes = window_bytes + 1 WHERE id = :sid", "stats"),
    ],
)
def test_a_projection_that_no_longer_matches_the_ledger(ledger: Ledger, change: str, kind: str) -> None:
    """The chain is intact, but the stored window or state was changed behind the ledger's back."""
    ledger.sql(change)
    result = verify(ledger.service, ledger.session_id)
    assert [str(f.kind) for f in result.findings] == [kind], result.findings


def test_verify_passes_after_deletion_and_catches_tampering_after_it(ledger: Ledger) -> None:
    ledger.service.delete_session(ledger.session_id)
    assert ledger.service.get_events(ledger.session_id, EventFilter.all()) == []
    result = verify(ledger.service, ledger.session_id)
    assert result.ok and result.deleted, result.findings
    erasure = ledger.records()[-1]
    assert erasure.kind is Kind.ERASURE
    ledger.sql(
        f"UPDATE ledger SET payload = {ledger.json('t')} WHERE session_id = :sid AND position = :p",
        t=canonical({**(erasure.payload or {}), "reason": "nothing happened"}),
        p=erasure.position,
    )
    assert first_finding(ledger) == ("edited", erasure.position)


def test_records_whose_session_row_was_deleted_are_still_verified(whole_ledger: Ledger) -> None:
    ledger = whole_ledger
    ledger.sql("DELETE FROM window_slots WHERE session_id = :sid")
    ledger.sql("DELETE FROM sessions WHERE id = :sid")
    assert ledger.session_id in ledger.service.ledger.session_ids()
    [result] = [r for r in verify_all(ledger.service) if r.session_id == ledger.session_id]
    assert not result.ok


@pytest.mark.parametrize(
    ("edit", "kind"),
    [
        ("UPDATE ledger SET kind = 'bogus' WHERE session_id = :sid AND position = 3", "edited"),
        (
            "UPDATE ledger SET recorded_at = '2026-13-45 00:00:00' WHERE session_id = :sid AND position = 3",
            "unreadable",
        ),
    ],
    ids=["a kind that is none", "a time that is none"],
)
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_row_that_cannot_be_read_back_is_its_sessions_finding_and_verify_goes_on(
    whole_ledger: Ledger, edit: str, kind: str, jobs: int
) -> None:
    """Its session is not ok, and every other session is still verified, on one process or more."""
    ledger = whole_ledger
    if kind == "unreadable" and ledger.backend != "sqlite":
        pytest.skip("only SQLite's text column holds a time that is no time")
    untouched = build_session(ledger.service)
    ledger.sql(edit)
    results = {r.session_id: r for r in verify_parallel(ledger.service, jobs)}
    assert results[untouched].ok, results[untouched].findings
    broken = results[ledger.session_id]
    assert broken.first is not None and str(broken.first.kind) == kind, broken.findings
    assert not verify(ledger.service, ledger.session_id).ok
