"""Timing on a shared, noisy machine: interleave the cases round by round and keep medians."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable


def timed(call: Callable[[], object]) -> float:
    """Seconds one call takes (the garbage collector paused, as `timeit` does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        started = time.perf_counter()
        call()
        return time.perf_counter() - started
    finally:
        if enabled:
            gc.enable()


def alternating(rounds: int, cases: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Median of what each case reports (its own measured seconds), the cases alternating each
    round with their order flipped every round, so a burst of load hits every case alike."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    for _ in range(rounds):
        for name in order:
            samples[name].append(cases[name]())
        order.reverse()
    return {name: statistics.median(values) for name, values in samples.items()}


def interleaved(rounds: int, cases: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median seconds per call of each case, alternating as `alternating` does."""
    return alternating(rounds, {name: (lambda call=call: timed(call)) for name, call in cases.items()})
