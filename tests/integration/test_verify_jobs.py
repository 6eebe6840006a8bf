"""`verify --jobs`: sessions, and long sessions in ranges, over processes, on PostgreSQL and SQLite.
Whatever the ranges, it finds what the one-process verify finds, at the same first position,
breaks at a range's edge included."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit import parallel, verify_all
from sessionledger.infrastructure.audit.parallel import verify_parallel

from tests.conftest import SQL_BACKENDS, sql_url
from tests.integration.test_tamper import Ledger, build_session
from tests.integration.test_tamper_coverage import with_shared_state


@pytest.fixture(params=SQL_BACKENDS)
def ledger(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    monkeypatch.setattr(parallel, "SPAN", 7)  # the 25-record session in four ranges
    with open_service(sql_url(request, request.param)) as service:
        ledger = Ledger(service, build_session(service), request.param)
        service.delete_session(with_shared_state(service, user="bob"))
        with_shared_state(service)  # written after the erasure: its shared state is judged
        yield ledger


def outcome(results: list) -> dict[str, list[tuple[str, int | None]]]:  # type: ignore[type-arg]
    return {r.session_id: [(str(f.kind), f.position) for f in r.findings] for r in results}


def test_an_intact_ledger_verifies_as_in_one_process(ledger: Ledger) -> None:
    one = list(verify_all(ledger.service))
    many = verify_parallel(ledger.service, 2)
    assert outcome(many) == outcome(one)
    assert all(r.ok for r in many)
    assert [(r.session_id, r.records, r.head_hash, r.deleted) for r in many] == [
        (r.session_id, r.records, r.head_hash, r.deleted) for r in one
    ]


TAMPERING: dict[str, Callable[[Ledger], None]] = {
    "payload edited": lambda t: t.sql(
        f"UPDATE ledger SET payload = {t.json('p')} WHERE session_id = :sid AND position = 10", p="{}"
    ),
    "first of a range deleted": lambda t: t.sql(
        "DELETE FROM ledger WHERE session_id = :sid AND position = 8"
    ),
    "last of a range deleted": lambda t: t.sql(
        "DELETE FROM ledger WHERE session_id = :sid AND position = 14"
    ),
    "inside a range deleted": lambda t: t.sql("DELETE FROM ledger WHERE session_id = :sid AND position = 17"),
    "recorded_at edited": lambda t: t.sql(
        "UPDATE ledger SET recorded_at = :t WHERE session_id = :sid AND position = 15",
        t=datetime(2020, 1, 1, tzinfo=UTC),
    ),
    "session state edited": lambda t: t.sql(
        f"UPDATE sessions SET state = {t.json('s')} WHERE id = :sid", s='{"mood":"angry"}'
    ),
    "window stats edited": lambda t: t.sql("UPDATE sessions SET window_bytes = 1 WHERE id = :sid"),
    "window slot dropped": lambda t: t.sql(
        "DELETE FROM window_slots WHERE session_id = :sid AND position IN "
        "(SELECT min(position) FROM window_slots WHERE session_id = :sid)"
    ),
    "app state edited": lambda t: t.sql(
        f"UPDATE app_states SET state = {t.json('s')} WHERE app_name = 'shared'", s='{"theme":"x"}'
    ),
}


@pytest.mark.parametrize("tamper", TAMPERING.values(), ids=TAMPERING.keys())
def test_each_break_is_found_where_one_process_finds_it(
    ledger: Ledger, tamper: Callable[[Ledger], None]
) -> None:
    tamper(ledger)
    one = outcome(list(verify_all(ledger.service)))
    many = outcome(verify_parallel(ledger.service, 2))
    assert any(one.values())
    assert {sid: found[:1] for sid, found in many.items()} == {sid: found[:1] for sid, found in one.items()}


def test_one_session_in_ranges(ledger: Ledger) -> None:
    ledger.service.append_message(ledger.session_id, UserMessage("one more"))
    [result] = verify_parallel(ledger.service, 2, [ledger.session_id])
    assert result.ok and result.records == ledger.last()


def test_memory_verifies_in_this_process() -> None:
    with open_service("memory://") as service:
        build_session(service)
        assert all(r.ok for r in verify_parallel(service, 2))


def test_more_jobs_than_the_machine_can_use_is_a_value_error_before_any_fork(sqlite_url: str) -> None:
    """Issue 25: `--jobs 100000` was still forking after a minute."""
    most = parallel.max_jobs()
    assert most == parallel.JOBS_PER_CPU * len(os.sched_getaffinity(0))
    with open_service(sqlite_url) as service:
        build_session(service)
        assert all(r.ok for r in verify_parallel(service, most))
        for jobs in (most + 1, 100_000):
            started = time.monotonic()
            with pytest.raises(ValueError, match=f"--jobs is at most {most} on this machine .*got {jobs}"):
                verify_parallel(service, jobs)
            assert time.monotonic() - started < 5
