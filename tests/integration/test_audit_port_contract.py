"""The audit port's contract (`domain.audit_port`), one suite run on memory, SQLite and PostgreSQL:
a snapshot sees one point in time, records from a position on, heads and their positions, the scan
of stored sessions covers each once, and an empty ledger and an unknown session read as nothing."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.audit_port import Moved, Trusted
from sessionledger.domain.hashing import canonical, sha256_hex
from sessionledger.infrastructure import SessionService, open_service

from tests.conftest import SQL_BACKENDS, backend_url

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", *SQL_BACKENDS])
def service(request: pytest.FixtureRequest) -> Iterator[SessionService]:
    """The service on a fresh, empty ledger of each backend (the scans see every session)."""
    url = backend_url(request, request.param)
    with open_service(url) as opened:
        yield opened


def session_with(service: SessionService, events: int, user: str = "u") -> str:
    session_id = f"s-{uuid.uuid4().hex[:10]}"
    service.create_session(user, session_id=session_id, state={"k": 1})
    for n in range(events):
        say(service, session_id, f"message {n}")
    return session_id


def say(service: SessionService, session_id: str, text: str) -> None:
    service.append_event(SessionEvent(session_id=session_id, message=UserMessage(text), timestamp=T0))


def test_an_empty_ledger_reads_as_nothing(service: SessionService) -> None:
    with service.ledger.audit_snapshot() as snapshot:
        assert snapshot.session_ids() == []
        assert list(snapshot.stored()) == []
        assert snapshot.top() == 0
        assert list(snapshot.row_hashes()) == []
        written, appended = snapshot.appended(0)
        assert (written, list(appended)) == ([], [])
        assert snapshot.last_positions(["nobody"]) == {}


def test_an_unknown_session_reads_as_nothing(service: SessionService) -> None:
    session_with(service, 2)
    with service.ledger.audit_snapshot() as snapshot:
        assert snapshot.records("nobody") == ([], [])
        assert list(snapshot.stored(["nobody"])) == []
        assert snapshot.last_positions(["nobody"]) == {}
        with snapshot.heads_sent(Trusted(["nobody"], [3], ["a" * 64], [None]), ["nobody"]) as heads:
            assert heads() == ({"nobody": Moved(None, None)}, {})


def test_records_from_a_position_on(service: SessionService) -> None:
    session_id = session_with(service, 5)
    every = service.records(session_id)
    with service.ledger.audit_snapshot() as snapshot:
        records, digests = snapshot.records(session_id)
        assert records == every
        assert digests == [sha256_hex(canonical(r.payload)) for r in every]
        assert [r.position for r in snapshot.records(session_id, after=2).records] == [3, 4, 5, 6]
        assert [r.position for r in snapshot.records(session_id, 2, 4).records] == [3, 4]
        assert snapshot.records(session_id, after=6) == ([], [])


def test_heads_and_their_positions(service: SessionService) -> None:
    first, second = session_with(service, 3), session_with(service, 1)
    service.delete_session(second)
    records = {sid: service.records(sid) for sid in (first, second)}
    with service.ledger.audit_snapshot() as snapshot:
        stored = {found.session_id: found for found in snapshot.stored()}
        assert snapshot.top() == max(r.global_position or 0 for rs in records.values() for r in rs)
        assert list(snapshot.row_hashes()) == [
            (sid, r.row_hash, r.global_position) for sid in sorted(records) for r in records[sid]
        ]
        assert snapshot.last_positions([first, second]) == {first: 4, second: 3}
    for sid, rs in records.items():
        assert stored[sid].head == (rs[-1].position, rs[-1].row_hash)
        assert stored[sid].version == rs[-1].version
    assert not stored[first].deleted and stored[second].deleted
    assert (stored[first].user_id, stored[first].state, stored[first].stats.events) == ("u", {"k": 1}, 3)


def test_the_scan_of_stored_sessions_covers_each_once(service: SessionService) -> None:
    made = [session_with(service, n % 3) for n in range(7)]
    service.delete_session(made[0])
    with service.ledger.audit_snapshot() as snapshot:
        assert sorted(snapshot.session_ids()) == sorted(made)
        assert sorted(found.session_id for found in snapshot.stored()) == sorted(made)
        asked = made[2:5]
        assert sorted(found.session_id for found in snapshot.stored(asked)) == sorted(asked)
        many = [*asked, *(f"unknown-{n}" for n in range(1_500))]  # more ids than one statement binds
        assert sorted(found.session_id for found in snapshot.stored(many)) == sorted(asked)


def test_appended_since_a_global_position_and_the_heads_that_moved(service: SessionService) -> None:
    kept, grown = session_with(service, 2), session_with(service, 2)
    with service.ledger.audit_snapshot() as snapshot:
        top = snapshot.top()
        heads = {found.session_id: found.head for found in snapshot.stored()}
    say(service, grown, "after the digest")
    sids = [kept, grown]
    trusted = Trusted(
        [*sids, "gone"],
        [*(heads[sid][0] for sid in sids), 1],
        [*(heads[sid][1] for sid in sids), "f" * 64],
        [None, None, None],
    )
    with service.ledger.audit_snapshot() as snapshot:
        written, appended = snapshot.appended(top)
        with snapshot.heads_sent(trusted, written) as asked:
            new = {sid: records for sid, records in appended}
            moved, touched = asked()
    assert written == [grown]
    [record] = new[grown].records
    assert record.position == heads[grown][0] + 1 and record.global_position == top + 1
    assert new[grown].digests == [sha256_hex(canonical(record.payload))]
    assert moved == {
        grown: Moved(heads[grown][1], (record.position, record.row_hash)),
        "gone": Moved(None, None),
    }
    assert touched == {grown: (record.position, record.row_hash)}


def test_a_snapshot_does_not_see_a_write_made_after_it_opened(service: SessionService) -> None:
    session_id = session_with(service, 2)
    with service.ledger.audit_snapshot() as snapshot:
        writer = threading.Thread(target=lambda: [say(service, session_id, "late"), session_with(service, 1)])
        writer.start()
        writer.join(timeout=30)  # memory, SQLite (WAL) and PostgreSQL all let the writer through
        assert not writer.is_alive()
        assert [r.position for r in snapshot.records(session_id).records] == [1, 2, 3]
        assert snapshot.session_ids() == [session_id]
        [stored] = snapshot.stored()
        assert stored.head[0] == 3 and stored.stats.events == 2
        assert snapshot.appended(snapshot.top())[0] == []
    with service.ledger.audit_snapshot() as snapshot:
        assert len(snapshot.records(session_id).records) == 4
        assert len(snapshot.session_ids()) == 2


def test_only_a_database_is_read_from_forked_processes(service: SessionService) -> None:
    assert service.ledger.readable_from_forks is (service.settings.database_url != "memory://")
