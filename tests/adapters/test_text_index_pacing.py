"""The keyword indexer's duty cycle (`index_pacing.Pacing`, issue 32): it rests `rest` times a
batch's time after a batch during which the ledger grew, and not otherwise; counted on a fake
clock, no time passes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sessionledger.infrastructure.ledger.index_pacing import BACKLOG_LIMIT, Batch, Pacing


class Clock:
    """A monotonic clock that advances `step` seconds between one reading and the next."""

    def __init__(self, step: float) -> None:
        self._readings: Iterator[float] = (n * step for n in range(1_000))

    def __call__(self) -> float:
        return next(self._readings)


def _paced(rest: float = 3.0, step: float = 2.0) -> tuple[Pacing, list[float]]:
    rests: list[float] = []
    return Pacing(rests.append, rest=rest, clock=Clock(step)), rests


def test_while_the_ledger_grows_each_batch_is_followed_by_rest_times_its_time() -> None:
    pacing, rests = _paced(rest=3.0, step=2.0)
    assert [pacing.run(lambda: Batch(2_000, 5_000), lambda: True) for _ in range(3)] == [2_000] * 3
    assert rests == [6.0, 6.0, 6.0]


def test_an_idle_ledger_is_indexed_at_full_speed() -> None:
    pacing, rests = _paced()
    assert pacing.run(lambda: Batch(2_000, 5_000), lambda: False) == 2_000
    assert rests == []


@pytest.mark.parametrize(
    ("batch", "rest"),
    [(Batch(0, 0), 3.0), (Batch(2_000, BACKLOG_LIMIT + 1), 3.0), (Batch(2_000, 5_000), 0.0)],
    ids=["caught-up", "past-the-backlog-limit", "unpaced"],
)
def test_no_rest_when_caught_up_past_the_backlog_limit_or_unpaced(batch: Batch, rest: float) -> None:
    pacing, rests = _paced(rest=rest)
    assert pacing.run(lambda: batch, lambda: True) == batch.indexed
    assert rests == []


def test_the_rest_stays_proportional_to_each_batch() -> None:
    """A slower batch (the machine busier) earns a longer rest: the share, not the wait, is fixed."""
    readings = iter([0.0, 1.0, 10.0, 14.0])
    rests: list[float] = []
    pacing = Pacing(rests.append, rest=3.0, clock=lambda: next(readings))
    for _ in range(2):
        pacing.run(lambda: Batch(2_000, 5_000), lambda: True)
    assert rests == [3.0, 12.0]
