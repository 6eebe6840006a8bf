"""PostgreSQL's `ledger_guard` trigger: ledger rows are append-only outside two narrow paths."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sessionledger.domain import UserMessage
from sessionledger.domain.chain import chain_problems
from sessionledger.infrastructure import SessionService, open_service

pytestmark = pytest.mark.postgres


@pytest.fixture
def service(pg_url: str) -> Iterator[SessionService]:
    with open_service(pg_url) as svc:
        yield svc


@pytest.fixture
def sql(pg_url: str) -> Iterator[psycopg.Connection]:
    """A plain connection to the same database, outside the service (autocommit)."""
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        yield conn


@pytest.fixture
def session_id(service: SessionService) -> str:
    s = service.create_session("u")
    service.append_message(s.id, UserMessage("hello"))
    service.append_message(s.id, UserMessage("world"))
    return s.id


def refused(sql: psycopg.Connection, statement: str, *params: object) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
        sql.execute(statement, params)


def test_updates_deletes_and_truncates_are_refused(sql: psycopg.Connection, session_id: str) -> None:
    refused(sql, "UPDATE ledger SET payload = '{}' WHERE session_id = %s AND position = 2", session_id)
    refused(sql, "UPDATE ledger SET row_hash = 'x' WHERE session_id = %s", session_id)
    refused(sql, "UPDATE ledger SET position = position + 10 WHERE session_id = %s", session_id)
    refused(sql, "DELETE FROM ledger WHERE session_id = %s AND position = 3", session_id)
    refused(sql, "TRUNCATE ledger")
    count = sql.execute("SELECT count(*) FROM ledger WHERE session_id = %s", (session_id,)).fetchone()
    assert count == (3,)


def test_token_count_is_filled_once(sql: psycopg.Connection, session_id: str) -> None:
    where = "WHERE session_id = %s AND position = 2"
    sql.execute(f"UPDATE ledger SET token_count = 5 {where}", (session_id,))
    refused(sql, f"UPDATE ledger SET token_count = 6 {where}", session_id)
    refused(sql, f"UPDATE ledger SET token_count = NULL {where}", session_id)
    refused(
        sql,
        "UPDATE ledger SET token_count = 1, branch = 'x' WHERE session_id = %s AND position = 3",
        session_id,
    )
    refused(
        sql,
        "UPDATE ledger SET token_count = 1, payload = '{}' WHERE session_id = %s AND position = 3",
        session_id,
    )
    assert sql.execute(f"SELECT token_count FROM ledger {where}", (session_id,)).fetchone() == (5,)


def test_payloads_are_erased_only_on_the_erasure_path(
    sql: psycopg.Connection, service: SessionService, session_id: str
) -> None:
    erase = "UPDATE ledger SET payload = NULL WHERE session_id = %s AND position = 2"
    refused(sql, erase, session_id)
    with sql.transaction():
        sql.execute("SELECT set_config('sessionledger.erasing', 'some-other-session', true)")
        refused(sql, erase, session_id)
    with sql.transaction():
        sql.execute("SELECT set_config('sessionledger.erasing', %s, true)", (session_id,))
        sql.execute(erase, (session_id,))
    setting = sql.execute("SELECT current_setting('sessionledger.erasing', true)").fetchone()[0]
    assert setting in (None, "")  # SET LOCAL ended with its transaction
    refused(sql, "UPDATE ledger SET payload = NULL WHERE session_id = %s AND position = 3", session_id)


def test_the_service_paths_pass_the_guard(service: SessionService, session_id: str) -> None:
    assert service.fill_token_counts(session_id, len) == 2
    service.delete_session(session_id)
    records = service.records(session_id)
    assert [r.kind for r in records] == ["created", "event", "event", "erasure"]
    assert [r.payload is None for r in records] == [True, True, True, False]
    assert [r.token_count for r in records][1:3] == [len("User: hello"), len("User: world")]
    assert chain_problems(records) == []


def test_an_edit_behind_the_guards_back_breaks_the_chain(
    sql: psycopg.Connection, service: SessionService, session_id: str
) -> None:
    with sql.transaction():
        sql.execute("ALTER TABLE ledger DISABLE TRIGGER ledger_guard")
        sql.execute(
            """UPDATE ledger SET payload = replace(payload::text, 'hello', 'HELLO')::json
               WHERE session_id = %s AND position = 2""",
            (session_id,),
        )
        sql.execute("ALTER TABLE ledger ENABLE TRIGGER ledger_guard")
    problems = chain_problems(service.records(session_id))
    assert problems == [f"{session_id} position 2: payload does not match its content hash (edited)"]
