"""`ThreadPool`: a bounded pool of threads that run calls for coroutines, each result handed straight
back to the awaiting event loop.

Why not `loop.run_in_executor` on a `ThreadPoolExecutor`: for a call that takes half a millisecond
(an append on PostgreSQL), its hand-off was a fifth of the adapter's time. A call there crosses
two futures (the executor's, chained to the loop's by callbacks under the executor future's
lock), and the pool thread keeps running Python after it has woken the loop (the future's
condition, the idle semaphore) while the woken loop waits for the GIL. Here a call is one tuple on
a `queue.SimpleQueue` (C, no Python lock) and the loop's own future; waking the loop is the last
thing the thread does before it waits for the next call. An empty hop measured about half the
time of `run_in_executor`'s (20 against 40-45 us on a loaded 2-core machine).

A cancelled await settles as `settling.py` says: a call no thread has begun is withdrawn (it never
runs), and once a thread has begun it the await ends with the call, with `CancelledError` (not as
`run_in_executor`'s, which raises at once while the call goes on). The call's future decides which,
at no cost to the loop for a call nobody cancels.

The threads are started with the first call and are daemons, so an unclosed pool never keeps the
interpreter alive; a finalizer (at `shutdown`, at garbage collection, or at exit) lets every call
already queued finish first, as `ThreadPoolExecutor` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from sessionledger.infrastructure.forks import forget_in_children

R = TypeVar("R")

_Call = tuple[asyncio.AbstractEventLoop, "CallFuture[Any]", contextvars.Context, Callable[[], Any]]


class CallFuture(asyncio.Future[R]):
    """The future of a call handed to a pool thread: cancelling it withdraws the call until a thread
    has begun it (`begin()`), and is refused after, so that the awaiting task's cancel waits for
    the call's end (asyncio raises it in the task once the future it waits on is done)."""

    _begun = False

    def begin(self) -> bool:
        """On the thread about to run the call: whether it may (`False`: a cancel withdrew it)."""
        with _BEGINNING:
            if self.cancelled():
                return False
            self._begun = True
            return True

    def cancel(self, msg: Any | None = None) -> bool:
        with _BEGINNING:
            return not self._begun and super().cancel(msg)


_BEGINNING = threading.Lock()
"""A thread beginning a call and a cancel withdrawing it: one of them, never both (held briefly)."""


class ThreadPool:
    """`size` threads running the calls `run` hands them, in the order handed."""

    def __init__(self, size: int, name: str) -> None:
        if size < 1:
            raise ValueError("a thread pool needs at least one thread")
        self._size = size
        self._name = name
        self._stopped = False
        self._without_threads()
        forget_in_children(self, ThreadPool._forget_parent)

    def _without_threads(self) -> None:
        """A queue, a lock and a finalizer, and no thread yet: the next call starts them."""
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # a call is queued before the threads' stop marks, or refused
        self._finalizer = weakref.finalize(self, _stop, self._calls, self._threads)

    async def run(self, call: Callable[[], R]) -> R:
        """`call()` on a pool thread, in the caller's context (its context variables), awaited;
        `RuntimeError` once the pool is shut down. Cancelling the await before a thread began the
        call withdraws it; after, `CancelledError` is raised once the call has ended."""
        loop = asyncio.get_running_loop()
        future: CallFuture[R] = CallFuture(loop=loop)
        with self._lock:
            if self._stopped:
                raise RuntimeError("the thread pool is shut down")
            if not self._threads:
                self._start()
            self._calls.put((loop, future, contextvars.copy_context(), call))
        return await future

    def _forget_parent(self) -> None:
        """In a forked child, whose threads stayed in the parent: no threads (the next call starts
        them), and no calls queued there or locks held there."""
        self._finalizer.detach()
        self._without_threads()

    def _start(self) -> None:
        for number in range(self._size):
            thread = threading.Thread(
                target=_serve, args=(self._calls,), name=f"{self._name}_{number}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def shutdown(self) -> None:
        """Refuse new calls, let the queued ones finish, and wait for the threads to end (blocking:
        call it off the event loop)."""
        with self._lock:
            self._stopped = True
        self._finalizer()


def _stop(calls: queue.SimpleQueue[_Call | None], threads: list[threading.Thread]) -> None:
    """One stop mark per thread, after every call already queued; then wait for them (but not for
    the thread running this, when the pool's last reference was dropped on one of its own)."""
    for _ in threads:
        calls.put(None)
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join()


def _serve(calls: queue.SimpleQueue[_Call | None]) -> None:
    """A pool thread: run calls until a stop mark."""
    while (handed := calls.get()) is not None:
        _run(*handed)
        del handed  # nothing of a call outlives it while the thread waits for the next


def _run(
    loop: asyncio.AbstractEventLoop,
    future: CallFuture[Any],
    context: contextvars.Context,
    call: Callable[[], Any],
) -> None:
    """Run one call and settle its future on its loop: the loop's wake-up is the last thing done."""
    if not future.begin():  # withdrawn by a cancel: it never runs
        return
    settle: Callable[[Any], None]
    try:
        settle, value = future.set_result, context.run(call)
    except BaseException as error:  # as ThreadPoolExecutor: the awaiting coroutine gets it
        settle, value = future.set_exception, error
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the result
        loop.call_soon_threadsafe(settle, value)
