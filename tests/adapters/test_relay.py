"""The relay's tailing rules: one wake-up per session per batch, gap-aware offsets, retry on failure."""

from __future__ import annotations

import pytest
from sessionledger.domain.records import TailRow
from sessionledger.infrastructure.ledger.relay_positions import MemoryRelayPositions
from sessionledger.workers.relay import RELAY_NAME, Relay


class FakeLedger:
    def __init__(self) -> None:
        self.rows: list[TailRow] = []

    def add(self, position: int, session_id: str, kind: str = "event") -> None:
        self.rows.append(TailRow(position, session_id, "app", kind))
        self.rows.sort(key=lambda row: row.global_position)

    def tail(self, after: int, limit: int) -> list[TailRow]:
        return [row for row in self.rows if row.global_position > after][:limit]


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup():
    ledger, woken, clock = FakeLedger(), [], Clock()
    positions = MemoryRelayPositions(ledger)
    relay = Relay(ledger, positions, woken.append, batch=100, gap_timeout=5.0, clock=clock)
    return ledger, positions, woken, clock, relay


def test_one_wake_up_per_session_per_batch_and_only_for_events(setup):
    ledger, positions, woken, _, relay = setup
    for position, session, kind in [
        (1, "a", "created"),
        (2, "a", "event"),
        (3, "b", "event"),
        (4, "a", "event"),
        (5, "c", "compaction"),
    ]:
        ledger.add(position, session, kind)
    assert relay.poll() == 5
    assert woken == [["a", "b"]]
    assert relay.offset == 5 and positions.load(RELAY_NAME) == 5
    assert relay.poll() == 0 and woken == [["a", "b"]]


def test_the_offset_waits_at_a_hole_without_sending_anything_twice(setup):
    ledger, _, woken, clock, relay = setup
    ledger.add(1, "a")
    ledger.add(2, "b")
    ledger.add(4, "d")  # 3 is not committed yet
    relay.poll()
    assert woken == [["a", "b", "d"]] and relay.offset == 2
    clock.now = 1.0
    relay.poll()
    assert woken == [["a", "b", "d"]] and relay.offset == 2  # 4 is not sent again
    ledger.add(3, "c")  # the late commit
    relay.poll()
    assert woken == [["a", "b", "d"], ["c"]] and relay.offset == 4


def test_a_hole_older_than_the_gap_timeout_is_permanent(setup):
    ledger, positions, woken, clock, relay = setup
    ledger.add(1, "a")
    ledger.add(3, "c")  # 2 was rolled back (a duplicate event id): it will never appear
    relay.poll()
    assert relay.offset == 1
    clock.now = 4.9
    relay.poll()
    assert relay.offset == 1
    clock.now = 5.1
    relay.poll()
    assert relay.offset == 3 and positions.load(RELAY_NAME) == 3
    assert woken == [["a", "c"]]


def test_holes_seen_together_are_waited_for_once_not_each_in_turn(setup):
    """A broker outage left 35 holes among 106 positions: one `gap_timeout` passes them all."""
    ledger, positions, woken, clock, relay = setup
    holes = set(range(3, 106, 3)[:35])
    for position in range(1, 107):
        if position not in holes:
            ledger.add(position, f"s{position}")
    relay.poll()
    assert relay.offset == 2 and len(woken[0]) == 106 - 35
    clock.now = 4.9
    relay.poll()
    assert relay.offset == 2
    clock.now = 5.1
    relay.poll()
    assert relay.offset == 106 and positions.load(RELAY_NAME) == 106
    assert len(woken) == 1  # every event was woken once, in the first round


def test_a_hole_seen_later_waits_its_own_time_from_when_it_was_seen(setup):
    ledger, _, _, clock, relay = setup
    ledger.add(1, "a")
    ledger.add(3, "c")
    relay.poll()
    clock.now = 3.0
    ledger.add(5, "e")  # 4 is missing too, seen only now
    relay.poll()
    clock.now = 5.1
    relay.poll()
    assert relay.offset == 3  # past 2 (seen at 0), waiting at 4 (seen at 3)
    clock.now = 8.1
    relay.poll()
    assert relay.offset == 5


def test_a_failed_wake_up_keeps_the_offset_and_is_sent_again(setup):
    ledger, positions, _, _, _ = setup
    attempts = []

    def flaky(sessions):
        attempts.append(list(sessions))
        if len(attempts) == 1:
            raise ConnectionError("broker down")

    relay = Relay(ledger, positions, flaky, batch=100)
    ledger.add(1, "a")
    with pytest.raises(ConnectionError):
        relay.poll()
    assert relay.offset == 0
    relay.poll()
    assert attempts == [["a"], ["a"]] and relay.offset == 1


def test_a_relay_resumes_from_its_stored_offset():
    ledger, woken = FakeLedger(), []
    positions = MemoryRelayPositions(ledger)
    positions.save(RELAY_NAME, 2)
    for position, session in [(1, "a"), (2, "b"), (3, "c")]:
        ledger.add(position, session)
    Relay(ledger, positions, woken.append).poll()
    assert woken == [["c"]]
