"""The `LeaseStore` contract (compaction leases), one suite run against memory, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from sessionledger.infrastructure.bootstrap import Storage


def new_session(storage: Storage) -> str:
    return storage.service.create_session("worker").id


def test_one_owner_holds_a_session_at_a_time(storage: Storage) -> None:
    session, leases = new_session(storage), storage.leases
    assert leases.holder(session) is None
    assert leases.claim(session, "task-a", 60)
    assert not leases.claim(session, "task-b", 60)
    assert leases.holder(session) == "task-a"


def test_the_same_owner_claims_its_lease_again(storage: Storage) -> None:
    session, leases = new_session(storage), storage.leases
    now = datetime.now(UTC)
    assert leases.claim(session, "task-a", 10, now=now)
    assert leases.claim(session, "task-a", 60, now=now + timedelta(seconds=5))  # redelivered
    assert leases.holder(session, now=now + timedelta(seconds=30)) == "task-a"  # and extended


def test_an_expired_lease_goes_to_the_next_owner(storage: Storage) -> None:
    session, leases = new_session(storage), storage.leases
    now = datetime.now(UTC)
    assert leases.claim(session, "task-a", 10, now=now)
    assert leases.holder(session, now=now + timedelta(seconds=5)) == "task-a"
    assert not leases.claim(session, "task-b", 10, now=now + timedelta(seconds=5))
    assert leases.holder(session, now=now + timedelta(seconds=11)) is None
    assert leases.claim(session, "task-b", 10, now=now + timedelta(seconds=11))
    assert leases.holder(session, now=now + timedelta(seconds=12)) == "task-b"


def test_only_the_holder_releases_a_lease(storage: Storage) -> None:
    session, leases = new_session(storage), storage.leases
    assert leases.claim(session, "task-a", 60)
    leases.release(session, "task-b")
    assert leases.holder(session) == "task-a"
    leases.release(session, "task-a")
    assert leases.holder(session) is None
    assert leases.claim(session, "task-b", 60)


def test_unknown_and_deleted_sessions_cannot_be_leased(storage: Storage) -> None:
    leases = storage.leases
    assert not leases.claim("no-such-session", "task-a", 60)
    assert leases.holder("no-such-session") is None
    session = new_session(storage)
    assert leases.claim(session, "task-a", 60)
    storage.service.delete_session(session)
    assert leases.holder(session) is None
    assert not leases.claim(session, "task-a", 60)


def test_of_many_owners_racing_for_a_lease_exactly_one_wins(storage: Storage) -> None:
    session, leases = new_session(storage), storage.leases
    owners = [f"task-{n}" for n in range(8)]
    start = threading.Barrier(len(owners))
    won: list[str] = []

    def claim(owner: str) -> None:
        start.wait()
        if leases.claim(session, owner, 60):
            won.append(owner)

    threads = [threading.Thread(target=claim, args=(owner,)) for owner in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and leases.holder(session) == won[0]
