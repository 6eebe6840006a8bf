"""The `RelayPositions` contract (where the relay is, who leads), run on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sessionledger.domain import UserMessage
from sessionledger.infrastructure.bootstrap import Storage


def test_stored_positions_only_move_forward(storage: Storage, unique: Callable[[str], str]) -> None:
    positions, name, other = storage.relay_positions, unique("relay"), unique("relay")
    assert positions.load(name) == 0
    positions.save(name, 10)
    positions.save(name, 7)  # a slower relay racing: ignored
    assert positions.load(name) == 10
    positions.save(name, 12)
    assert positions.load(name) == 12 and positions.load(other) == 0


def test_positions_survive_a_restart(
    storage: Storage, reopen: Callable[[], Storage], unique: Callable[[str], str]
) -> None:
    name = unique("relay")
    storage.relay_positions.save(name, 42)
    assert reopen().relay_positions.load(name) == 42


def test_the_lag_counts_the_ledger_rows_after_the_stored_position(
    storage: Storage, unique: Callable[[str], str]
) -> None:
    positions, service, name = storage.relay_positions, storage.service, unique("relay")
    head = positions.lag(name)  # nothing stored yet: every row of the ledger
    positions.save(name, head)
    assert positions.lag(name) == 0
    session = service.create_session("worker").id  # one `created` record
    service.append_message(session, UserMessage("hello"))  # one `event` record
    assert positions.lag(name) == 2
    positions.save(name, head + 1)
    assert positions.lag(name) == 1


def test_a_relay_leads_at_once_when_no_other_relay_does(
    storage: Storage, unique: Callable[[str], str]
) -> None:
    with storage.relay_positions.leadership(unique("relay"), threading.Event()) as leading:
        assert leading


def test_a_second_relay_waits_as_a_standby_until_the_leader_goes(
    storage: Storage, reopen: Callable[[], Storage], database_url: str, unique: Callable[[str], str]
) -> None:
    if not database_url.startswith(("postgresql", "mysql")):
        pytest.skip(
            "only PostgreSQL and MariaDB let a relay see the others: on SQLite and in memory all lead"
        )
    name, standby, stop = unique("relay"), reopen().relay_positions, threading.Event()
    took_over = threading.Event()

    def wait_as_standby() -> None:
        with standby.leadership(name, stop) as leading:
            if leading:
                took_over.set()

    waiting = threading.Thread(target=wait_as_standby)
    try:
        with storage.relay_positions.leadership(name, threading.Event()) as leading:
            assert leading
            waiting.start()
            assert not took_over.wait(2.5)  # the standby keeps waiting while the leader leads
        assert took_over.wait(10)
    finally:
        stop.set()  # a standby that never took over stops waiting
        if waiting.is_alive():
            waiting.join()


def test_a_waiting_standby_stops_without_leading(
    storage: Storage, reopen: Callable[[], Storage], database_url: str, unique: Callable[[str], str]
) -> None:
    if not database_url.startswith(("postgresql", "mysql")):
        pytest.skip(
            "only PostgreSQL and MariaDB let a relay see the others: on SQLite and in memory all lead"
        )
    name, standby, stop = unique("relay"), reopen().relay_positions, threading.Event()
    with storage.relay_positions.leadership(name, threading.Event()) as leading:
        assert leading
        threading.Timer(1.5, stop.set).start()
        with standby.leadership(name, stop) as standby_leads:
            assert not standby_leads
