"""What `verify` used to miss, on PostgreSQL and SQLite: each caught, by the chain where it can be
and by a digest where only an outside anchor can, with the position named.

- `recorded_at` edited (what `replay --at` returns): the row hash covers it (the chain);
- `app_states` / `user_states` edited: recomputed from the ledger's shared writes (the state
  check), without false alarms for imported or deleted sessions;
- the last rows deleted with the session row rolled back to match, and a whole session deleted:
  the digest.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.chain import covers_recorded_at
from sessionledger.domain.hashing import GENESIS_HASH, row_hash
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import export_lines, import_lines, verify, verify_all
from sessionledger.infrastructure.audit.anchored import Anchor, verify_against
from sessionledger.infrastructure.audit.digest import take_digest

from tests.conftest import SQL_BACKENDS
from tests.integration.test_tamper import Ledger, open_ledger


@pytest.fixture(params=SQL_BACKENDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """A fresh database each (the shared-state check judges the whole ledger)."""
    yield from open_ledger(request, shared=False)


def whole(service: SessionService) -> dict[str, list[tuple[str, int | None]]]:
    return {r.session_id: [(str(f.kind), f.position) for f in r.findings] for r in verify_all(service)}


def with_shared_state(service: SessionService, user: str = "ann") -> str:
    session_id = service.create_session(user, app_name="shared", state={"app:theme": "dark"}).id
    service.append_message(session_id, UserMessage("hello"), state_delta={"user:lang": "en", "n": 1})
    service.append_message(session_id, UserMessage("again"), state_delta={"app:theme": "light"})
    return session_id


def test_every_write_path_puts_recorded_at_under_the_row_hash(ledger: Ledger) -> None:
    service = ledger.service
    other = with_shared_state(service)
    service.ingest([SessionEvent(session_id=other, message=UserMessage("batched"))])
    service.delete_session(other)
    for session_id in (ledger.session_id, other):
        records = service.records(session_id)
        assert {r.kind for r in records} >= {"created", "event"}
        assert all(covers_recorded_at(r) is True for r in records), session_id


def test_an_edited_recorded_at_breaks_the_chain_where_it_was_edited(ledger: Ledger) -> None:
    target = ledger.records()[4]
    assert target.recorded_at is not None
    ledger.sql(
        "UPDATE ledger SET recorded_at = :t WHERE session_id = :sid AND position = 5",
        t=target.recorded_at - timedelta(hours=3),
    )
    result = verify(ledger.service, ledger.session_id)
    assert result.first is not None
    assert (str(result.first.kind), result.first.position) == ("edited", 5)
    assert "recorded_at" in result.first.detail


def test_records_hashed_before_recorded_at_was_still_verify(ledger: Ledger) -> None:
    """A ledger written by an older release: the header without the recording time."""
    prev = GENESIS_HASH
    for record in ledger.records():
        new_hash = row_hash(
            prev, record.session_id, record.position, record.version, record.event_id, record.kind,
            record.occurred_at, record.content_hash,
        )  # fmt: skip
        ledger.sql(
            "UPDATE ledger SET prev_hash = :prev, row_hash = :h WHERE session_id = :sid AND position = :p",
            prev=prev,
            h=new_hash,
            p=record.position,
        )
        prev = new_hash
    ledger.sql("UPDATE sessions SET head_hash = :h WHERE id = :sid", h=prev)
    assert all(covers_recorded_at(r) is False for r in ledger.records())
    assert verify(ledger.service, ledger.session_id).ok
    url = ledger.service.ledger.engine.url.render_as_string(hide_password=False)  # type: ignore[attr-defined]
    with open_service(url) as upgraded:  # a new process: no head cached from before the rewrite
        upgraded.append_message(ledger.session_id, UserMessage("written by this release"))
        assert covers_recorded_at(upgraded.records(ledger.session_id)[-1]) is True
        assert verify(upgraded, ledger.session_id).ok


def test_shared_state_as_written_verifies(ledger: Ledger) -> None:
    with_shared_state(ledger.service)
    with_shared_state(ledger.service, user="bob")
    assert all(not findings for findings in whole(ledger.service).values())


@pytest.mark.parametrize(
    ("table", "where", "forged"),
    [
        ("app_states", "app_name = 'shared'", '{"theme":"x"}'),
        ("user_states", "app_name = 'shared' AND user_id = 'ann'", '{"lang":"fr"}'),
    ],
)
def test_an_edited_shared_state_is_named_at_its_last_write(
    ledger: Ledger, table: str, where: str, forged: str
) -> None:
    first = with_shared_state(ledger.service)
    last = with_shared_state(ledger.service, user="ann")
    ledger.sql(f"UPDATE {table} SET state = {ledger.json('s')} WHERE {where}", s=forged)
    found = whole(ledger.service)
    position = 3 if table == "app_states" else 2  # the last write of app:theme / user:lang
    assert found[last] == [("state", position)]
    assert found[first] == []


def test_a_key_no_record_wrote_is_named(ledger: Ledger) -> None:
    session_id = with_shared_state(ledger.service)
    ledger.sql(
        f"UPDATE app_states SET state = {ledger.json('s')} WHERE app_name = 'shared'",
        s='{"theme":"light","admin":true}',
    )
    assert whole(ledger.service)[session_id] == [("state", None)]


def test_imported_and_deleted_sessions_keep_the_shared_state_verifying(ledger: Ledger) -> None:
    source = with_shared_state(ledger.service)
    lines = list(export_lines(ledger.service, source))
    with open_service("memory://") as elsewhere:
        imported = import_lines(elsewhere, lines)
        assert elsewhere.get_session(imported.session_id, user_id="ann").state["app:theme"] == "light"  # type: ignore[union-attr]  # the session exists: just imported
        assert all(r.ok for r in verify_all(elsewhere))
    lines[0] = lines[0].replace(source, "copy-of-" + source)
    with open_service("sqlite://") as elsewhere:  # importing over a scope that exists already
        with_shared_state(elsewhere)
        assert all(r.ok for r in verify_all(elsewhere))
    ledger.service.delete_session(source)
    assert all(not findings for findings in whole(ledger.service).values())


def test_the_last_rows_deleted_with_the_session_row_rolled_back(ledger: Ledger) -> None:
    engine = ledger.service.ledger.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        before = dict(
            conn.execute(sa.text("SELECT * FROM sessions WHERE id = :sid"), {"sid": ledger.session_id})
            .one()
            ._mapping
        )
    last = ledger.last()
    ledger.service.append_message(ledger.session_id, UserMessage("to be removed"))
    ledger.service.append_message(ledger.session_id, UserMessage("to be removed too"))
    digest = take_digest(ledger.service.ledger)
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid AND position > :p", p=last)
    columns = ", ".join(f"{name} = :{name}" for name in before if name not in ("id", "metadata", "state"))
    ledger.sql(
        f"UPDATE sessions SET {columns} WHERE id = :sid",
        **{k: v for k, v in before.items() if k not in ("id", "metadata", "state")},
    )
    assert verify(ledger.service, ledger.session_id).ok  # the chain alone cannot tell
    [result] = [r for r in verify_against(ledger.service, [digest]) if r.session_id == ledger.session_id]
    assert [(str(f.kind), f.position) for f in result.findings] == [(Anchor.TRUNCATED, last + 1)]


def test_a_whole_session_deleted(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    for table, column in (("ledger", "session_id"), ("window_slots", "session_id"), ("sessions", "id")):
        ledger.sql(f"DELETE FROM {table} WHERE {column} = :sid")
    assert all(r.ok for r in verify_all(ledger.service))  # the chain alone cannot tell
    [result] = [r for r in verify_against(ledger.service, [digest]) if r.session_id == ledger.session_id]
    assert [(str(f.kind), f.position) for f in result.findings] == [(Anchor.REMOVED, 1)]
