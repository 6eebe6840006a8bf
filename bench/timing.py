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


def interleaved(rounds: int, cases: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median seconds per case, the cases alternating each round (their order flips every round),
    so a burst of load on the machine hits every case alike."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    for _ in range(rounds):
        for name in order:
            samples[name].append(timed(cases[name]))
        order.reverse()
    return {name: statistics.median(times) for name, times in samples.items()}
