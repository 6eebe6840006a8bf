"""`sessionledger migrate --partitions N`: a populated ledger converted to hash partitions by
session id verifies, reads and appends as before; and every session-scoped statement the service
runs touches one partition of each table (their plans, as PostgreSQL's `auto_explain` logs them
while the service works, name no second partition).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sessionledger.domain import AssistantMessage, EventFilter, SessionEvent, UserMessage
from sessionledger.domain.compaction import SlidingWindowStrategy, TurnCountTrigger
from sessionledger.infrastructure import SessionService, Settings, open_service
from sessionledger.infrastructure.audit.verify import verify, verify_all
from sessionledger.infrastructure.bootstrap import migrate_storage

pytestmark = pytest.mark.postgres

CLI = str(Path(sys.executable).with_name("sessionledger"))
PARTITION = re.compile(r"\b(sessions|ledger|window_slots)_h(\d+)_(\d+)")
SNAPSHOT_OPENER = re.compile(r"Query Text: SELECT ledger.global_position\s+FROM ledger\s+LIMIT")
"""The one statement of the workload that is not session-scoped: an audit snapshot's first read
(`audit_reads.py`), any one row, which stops at the first partition that has one."""


def populate(service: SessionService) -> list[str]:
    """Sessions with everything a ledger holds: appends, a compaction, a rewind, an erasure."""
    ids = []
    for n in range(6):
        session = service.create_session(f"user-{n % 2}", state={"user:k": n, "mine": n})
        for turn in range(4):
            service.append_message(session.id, UserMessage(f"question {n}.{turn}"))
            service.append_message(session.id, AssistantMessage(f"answer {n}.{turn}"))
        ids.append(session.id)
    service.compact(ids[0], TurnCountTrigger(2), SlidingWindowStrategy(max_events=3))
    tagged = SessionEvent(session_id=ids[1], message=UserMessage("tagged"), invocation_id="inv-1")
    service.append_event(tagged)
    service.rewind(ids[1], "inv-1")
    service.delete_session(ids[2])
    return ids


def picture(service: SessionService, ids: list[str]) -> dict[str, Any]:
    """Everything a reader sees of the sessions: records (global positions included), windows, versions."""
    return {
        sid: (
            [(r.global_position, r.position, r.row_hash) for r in service.records(sid)],
            service.get_messages(sid),
            service.get_events(sid),
            service.event_version(sid),
            service.get_session(sid),
        )
        for sid in ids
    }


def migrate(url: str, partitions: str) -> subprocess.CompletedProcess[str]:
    """`sessionledger migrate --partitions`, as an operator runs it."""
    command = [CLI, "migrate", "--database-url", url, "--partitions", partitions]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def partitions_of(pg_url: str) -> dict[str, int]:
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, count(i.inhrelid) FROM pg_class c JOIN pg_inherits i ON i.inhparent = c.oid "
            "WHERE c.relname IN ('sessions', 'ledger', 'window_slots') GROUP BY c.relname"
        ).fetchall()
    return dict(rows)


def test_a_populated_ledger_is_converted_and_verifies_before_and_after(pg_url: str) -> None:
    with open_service(pg_url) as service:
        ids = populate(service)
        assert all(v.ok for v in verify_all(service))
        before = picture(service, ids)
    result = migrate(pg_url, "4")
    assert result.returncode == 0, result.stderr
    assert "from no to 4 hash partitions" in result.stdout
    assert partitions_of(pg_url) == {"sessions": 4, "ledger": 4, "window_slots": 4}

    with open_service(pg_url) as service:
        assert all(v.ok for v in verify_all(service))
        assert picture(service, ids) == before
        top = max(r.global_position or 0 for sid in ids for r in service.records(sid))
        event = service.append_message(ids[3], UserMessage("after"))
        appended = service.records(ids[3])[-1]
        assert appended.event_id == event.id and (appended.global_position or 0) > top
        assert not service.append_event(event)  # the idempotency key holds across partitions
        assert verify(service, ids[3]).ok

    # again, to another count: the same procedure
    assert migrate_storage(Settings(database_url=pg_url), partitions=8).partitions == 8
    with open_service(pg_url) as service:
        assert all(v.ok for v in verify_all(service))
        assert {sid: view for sid, view in picture(service, ids).items() if sid != ids[3]} == {
            sid: view for sid, view in before.items() if sid != ids[3]
        }
    assert migrate_storage(Settings(database_url=pg_url)).partitions == 8  # a plain migrate keeps them


def test_the_guard_holds_on_every_partition(pg_url: str) -> None:
    with open_service(pg_url) as service:
        session = service.create_session("u")
        service.append_message(session.id, UserMessage("kept"))
    migrate_storage(Settings(database_url=pg_url), partitions=2)
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as sql:
        row = sql.execute("SELECT tableoid::regclass::text FROM ledger LIMIT 1").fetchone()
        assert row is not None
        holder = row[0]  # the partition the session's rows are in
        for statement in (
            "UPDATE ledger SET row_hash = 'x'",
            "DELETE FROM ledger",
            "TRUNCATE ledger",
            f"UPDATE {holder} SET row_hash = 'x'",
            f"DELETE FROM {holder}",
            "TRUNCATE ledger_h2_0",
            "TRUNCATE ledger_h2_1",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                sql.execute(statement.encode())
        assert sql.execute("SELECT count(*) FROM ledger").fetchone() == (2,)


@pytest.mark.parametrize("url", ["memory://", "sqlite:///{tmp}/ledger.db"])
def test_only_postgresql_is_partitioned(url: str, tmp_path: Any) -> None:
    url = url.format(tmp=tmp_path)
    result = migrate(url, "4")
    assert result.returncode == 2 and "PostgreSQL" in result.stderr
    assert not (tmp_path / "ledger.db").exists()


@pytest.mark.parametrize("count", ["1", "0", "5000"])
def test_a_partition_count_out_of_range_changes_nothing(pg_url: str, count: str) -> None:
    result = migrate(pg_url, count)
    assert result.returncode == 2 and "between 2 and" in result.stderr
    assert partitions_of(pg_url) == {}
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('ledger')").fetchone() == (None,)


@pytest.fixture
def plans(pg_url: str) -> Iterator[list[str]]:
    """The plan of every statement run on connections opened from here on (`auto_explain`,
    its log lines sent to the client and collected), on a ledger with 8 partitions."""
    migrate_storage(Settings(database_url=pg_url), partitions=8)
    logged: list[str] = []

    def explain_everything(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.add_notice_handler(lambda notice: logged.append(notice.message_primary or ""))
        dbapi_connection.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET client_min_messages = log"
        )
        dbapi_connection.commit()

    sa.event.listen(sa.pool.Pool, "connect", explain_everything)
    try:
        yield logged
    finally:
        sa.event.remove(sa.pool.Pool, "connect", explain_everything)


def test_every_session_scoped_statement_touches_one_partition(
    pg_url: str, plans: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the keyword indexer's thread works across sessions by design (it finds the sessions behind,
    # and looks at the ledger's end to pace itself): off here, so only the service's statements run
    monkeypatch.setenv("SESSIONLEDGER_TEXT_INDEX", "off")
    with open_service(pg_url) as service:
        session = service.create_session("u", state={"k": 1})
        for turn in range(8):  # enough runs of each statement for PostgreSQL's generic plans too
            service.append_message(session.id, UserMessage(f"question {turn}"))
            service.append_message(session.id, AssistantMessage(f"answer {turn}"))
            service.ingest([SessionEvent(session_id=session.id, message=UserMessage(f"batch {turn}"))])
            service.get_messages(session.id)
            service.get_events(session.id)
            service.get_events(session.id, EventFilter.keyword_search("answer"))
            service.get_events(session.id, EventFilter.last(3))
            service.event_version(session.id)
            service.window_stats(session.id)
            service.get_session(session.id)
        service.compact(session.id, TurnCountTrigger(2), SlidingWindowStrategy(max_events=4))
        service.records(session.id)
        assert verify(service, session.id).ok
        service.list_sessions("u")  # cross-session: it fans out, and the check must see that
        service.delete_session(session.id)

    explained = [plan for plan in plans if "Query Text:" in plan]
    touching = [plan for plan in explained if PARTITION.search(plan)]
    assert len(touching) > 50  # the workload's statements were seen, partitions and all
    fanning_out = [plan for plan in explained if fans_out(plan) and not SNAPSHOT_OPENER.search(plan)]
    listing = [plan for plan in fanning_out if "sessions.user_id =" in plan]
    assert listing  # the one cross-session statement run, seen reading every partition
    session_scoped = [plan for plan in fanning_out if plan not in listing]
    assert not session_scoped, "\n\n".join(session_scoped)


RESULT_RELATION = re.compile(r"^\s*(Update|Delete) on \w+_h\d+_\d+")
"""A generic plan's UPDATE or DELETE lists every partition it might write; runtime pruning then
initializes and scans only the session's (`Subplans Removed`), so those lines are no reads."""


def fans_out(plan: str) -> bool:
    """Whether the plan reads more than one partition of a table."""
    touched: dict[str, set[str]] = {}
    for line in plan.splitlines():
        if not RESULT_RELATION.match(line):
            for table, _, remainder in PARTITION.findall(line):
                touched.setdefault(table, set()).add(remainder)
    return any(len(found) > 1 for found in touched.values())


def _plans(driver: Any) -> tuple[int, int, str]:
    """The custom and generic plans of the ledger's own prepared statements on this connection,
    and its `plan_cache_mode`."""
    custom, generic = driver.execute(
        "SELECT coalesce(sum(custom_plans), 0), coalesce(sum(generic_plans), 0) "
        "FROM pg_prepared_statements WHERE name LIKE 'sessionledger_%'"
    ).fetchone()
    return int(custom), int(generic), driver.execute("SHOW plan_cache_mode").fetchone()[0]


@pytest.mark.parametrize("partitions", [None, 4])
def test_a_partitioned_ledger_plans_its_appends_once(pg_url: str, partitions: int | None) -> None:
    """On a partitioned ledger the append's generic plan spans every partition of `sessions`, which
    PostgreSQL's plan cache costs above a pruned one: left to itself it plans the append afresh at
    every call once the partitions hold a few thousand sessions (a third of the append's time at
    10,000,000 events). The connection that appends plans it once, and hands the setting back."""
    migrate_storage(Settings(database_url=pg_url), partitions=partitions)
    with open_service(pg_url) as service:
        session = service.create_session("alice").id
        for n in range(12):
            service.append_message(session, UserMessage(f"message {n}"))
        autocommit = service.ledger.autocommit  # type: ignore[attr-defined]  # the SQL ledger's
        with autocommit() as driver:
            custom, generic, mode = _plans(driver)
        if partitions:
            assert (custom, mode) == (0, "force_generic_plan") and generic >= 11
        else:
            assert mode == "auto" and custom + generic >= 11  # unpartitioned: PostgreSQL's own choice
        autocommit.close()
        with service.ledger.engine.connect() as pooled:  # type: ignore[attr-defined]
            assert pooled.exec_driver_sql("SHOW plan_cache_mode").scalar_one() == "auto"
