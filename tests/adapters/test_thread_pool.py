"""ThreadPool: results, exceptions and context variables reach the awaiting coroutine; a cancelled
await leaves the pool working, withdraws a call no thread began and waits for one begun; shutdown
lets the queued calls finish, then refuses new ones."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest
from sessionledger.infrastructure.thread_pool import ThreadPool

REQUEST = contextvars.ContextVar("request", default="none")


def test_results_exceptions_and_context_reach_the_caller() -> None:
    async def scenario() -> None:
        pool = ThreadPool(2, "test-pool")
        try:
            assert await pool.run(lambda: threading.current_thread().name.startswith("test-pool")) is True
            REQUEST.set("r1")
            assert await pool.run(REQUEST.get) == "r1"
            with pytest.raises(KeyError):
                await pool.run(lambda: {}["missing"])
            assert sorted(await asyncio.gather(*(pool.run(lambda n=n: n * n) for n in range(20)))) == [
                n * n for n in range(20)
            ]
        finally:
            pool.shutdown()

    asyncio.run(scenario())


def test_a_cancelled_await_leaves_the_pool_working() -> None:
    async def scenario() -> None:
        pool = ThreadPool(1, "test-pool")
        try:
            slow = asyncio.ensure_future(pool.run(lambda: time.sleep(0.05)))
            await asyncio.sleep(0.01)
            slow.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow
            assert await pool.run(lambda: "after") == "after"
        finally:
            pool.shutdown()

    asyncio.run(scenario())


def test_a_call_cancelled_before_a_thread_took_it_never_runs() -> None:
    ran: list[str] = []

    async def scenario() -> None:
        pool = ThreadPool(1, "test-pool")
        try:
            busy = asyncio.ensure_future(pool.run(lambda: time.sleep(0.05)))
            queued = asyncio.ensure_future(pool.run(lambda: ran.append("queued")))
            await asyncio.sleep(0.01)  # the one thread is busy, the second call waits in the queue
            queued.cancel()
            await busy
            assert await pool.run(lambda: "after") == "after"
        finally:
            pool.shutdown()

    asyncio.run(scenario())
    assert ran == []


def test_shutdown_finishes_the_queued_calls_then_refuses() -> None:
    done: list[int] = []

    async def scenario() -> None:
        pool = ThreadPool(1, "test-pool")
        calls = [
            asyncio.ensure_future(pool.run(lambda n=n: (time.sleep(0.005), done.append(n)))) for n in range(5)
        ]
        await asyncio.sleep(0)  # every call queued
        await asyncio.to_thread(pool.shutdown)
        assert done == list(range(5))
        await asyncio.gather(*calls)
        with pytest.raises(RuntimeError):
            await pool.run(lambda: None)

    asyncio.run(scenario())


def test_a_cancel_after_a_thread_began_the_call_is_raised_once_the_call_has_ended() -> None:
    began, ended = threading.Event(), threading.Event()

    def call() -> None:
        began.set()
        time.sleep(0.05)
        ended.set()

    async def scenario() -> None:
        pool = ThreadPool(1, "test-pool")
        try:
            running = asyncio.ensure_future(pool.run(call))
            while not began.is_set():
                await asyncio.sleep(0.001)
            running.cancel()
            await asyncio.sleep(0.01)
            running.cancel()  # a second cancel waits too
            with pytest.raises(asyncio.CancelledError):
                await running
            assert ended.is_set()
        finally:
            pool.shutdown()

    asyncio.run(scenario())
