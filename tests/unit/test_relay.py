"""The relay's tailing rules: one wake-up per session per batch, gap-aware offsets, retry on failure."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sessionledger.domain.ports import TailRow
from sessionledger.infrastructure.ledger.schema import relay_offsets
from sessionledger.workers.relay import Relay, RelayOffsets


class FakeLedger:
    def __init__(self) -> None:
        self.rows: list[TailRow] = []

    def add(self, position: int, session_id: str, kind: str = "event") -> None:
        self.rows.append(TailRow(position, session_id, "app", kind))
        self.rows.sort(key=lambda row: row.global_position)

    def tail(self, after: int, limit: int) -> list[TailRow]:
        return [row for row in self.rows if row.global_position > after][:limit]


class FakeOffsets:
    def __init__(self, start: int = 0) -> None:
        self.saved = [start]

    def load(self, name: str) -> int:
        return self.saved[-1]

    def save(self, name: str, position: int) -> None:
        self.saved.append(position)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup():
    ledger, offsets, woken, clock = FakeLedger(), FakeOffsets(), [], Clock()
    relay = Relay(ledger, offsets, woken.append, batch=100, gap_timeout=5.0, clock=clock)
    return ledger, offsets, woken, clock, relay


def test_one_wake_up_per_session_per_batch_and_only_for_events(setup):
    ledger, offsets, woken, _, relay = setup
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
    assert relay.offset == 5 and offsets.saved[-1] == 5
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
    ledger, offsets, woken, clock, relay = setup
    ledger.add(1, "a")
    ledger.add(3, "c")  # 2 was rolled back (a duplicate event id): it will never appear
    relay.poll()
    assert relay.offset == 1
    clock.now = 4.9
    relay.poll()
    assert relay.offset == 1
    clock.now = 5.1
    relay.poll()
    assert relay.offset == 3 and offsets.saved[-1] == 3
    assert woken == [["a", "c"]]


def test_a_failed_wake_up_keeps_the_offset_and_is_sent_again(setup):
    ledger, offsets, _, _, _ = setup
    attempts = []

    def flaky(sessions):
        attempts.append(list(sessions))
        if len(attempts) == 1:
            raise ConnectionError("broker down")

    relay = Relay(ledger, offsets, flaky, batch=100)
    ledger.add(1, "a")
    with pytest.raises(ConnectionError):
        relay.poll()
    assert relay.offset == 0
    relay.poll()
    assert attempts == [["a"], ["a"]] and relay.offset == 1


def test_a_relay_resumes_from_its_stored_offset():
    ledger, offsets, woken = FakeLedger(), FakeOffsets(start=2), []
    for position, session in [(1, "a"), (2, "b"), (3, "c")]:
        ledger.add(position, session)
    Relay(ledger, offsets, woken.append).poll()
    assert woken == [["c"]]


def test_stored_offsets_only_move_forward(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'offsets.db'}")
    relay_offsets.create(engine)
    offsets = RelayOffsets(engine)
    assert offsets.load("evaluate") == 0
    offsets.save("evaluate", 10)
    offsets.save("evaluate", 7)  # a slower relay racing: ignored
    assert offsets.load("evaluate") == 10
    offsets.save("evaluate", 12)
    assert offsets.load("evaluate") == 12 and offsets.load("other") == 0
