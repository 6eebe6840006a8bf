"""Timing on a shared, noisy machine: interleave the cases round by round and keep medians; and how
long an event loop stalls."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable


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


async def largest_stall(work: Callable[[], Awaitable[object]], tick: float = 0.001) -> float:
    """The longest the event loop went past a ticker's wake-up time while `work` ran (s): a
    coroutine that sleeps `tick` and records how late it woke."""
    done = asyncio.Event()
    worst = 0.0

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(tick)
            now = time.perf_counter()
            worst = max(worst, now - last - tick)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        await work()
    finally:
        done.set()
        await ticking
    return worst
