"""`settled(write)`: a write that a cancel does not cut short: `CancelledError` reaches its caller
only once the write has settled, stored (the next read sees it) or never to be.

Why: a cancel (`task.cancel()`, `asyncio.wait_for`'s or `asyncio.timeout`'s) lands wherever the
task is waiting. When that is the end of a write run elsewhere (a statement on the server, a call on
a pool thread, an adapter's write and then its own bookkeeping), the write goes on after the caller
has seen `CancelledError`: a caller that reloads then finds the write absent, and it appears later
(google-adk's reloaded session then failed as stale), or the caller's objects disagree with the
ledger. So the cancel waits for the write instead, and is raised once the write has ended (its
result or error dropped); a second cancel meanwhile only waits too. The write's own limits bound
that wait (the statement timeout, the pool's queue), so nothing waits for ever.

How, without a task or a loop turn more per write: asyncio cancels a task by cancelling the future
it waits on, and when that future refuses (`cancel()` returns `False`) the task keeps waiting and
gets `CancelledError` at its next step, once the future is done. `settled` shows the task each
future the write waits on through a view that refuses, and on that `CancelledError` resumes the
write where it was; the thread pool's futures refuse on their own (`thread_pool.py`), once a thread
has begun the call (before, the cancel withdraws it: it never runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from contextvars import Context
from typing import Any, Generic, TypeVar

R = TypeVar("R")


def settled(write: Awaitable[R]) -> Awaitable[R]:
    """`write` to await, whose cancel waits for the write's end: then `CancelledError` is raised."""
    return _Settled(write)


class _Settled(Generic[R]):
    """Drives `write`'s awaits, each future it waits on shown to the task as one it cannot cancel."""

    __slots__ = ("_write",)

    def __init__(self, write: Awaitable[R]) -> None:
        self._write = write

    def __await__(self) -> Generator[Any, Any, R]:
        steps = self._write.__await__()
        cancelled = False
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                waited = steps.send(sent) if thrown is None else steps.throw(thrown)
            except StopIteration as end:
                if cancelled:
                    raise asyncio.CancelledError from None
                outcome: R = end.value
                return outcome
            except Exception as error:
                if cancelled:  # the caller asked for CancelledError, not the write's outcome
                    raise asyncio.CancelledError from error
                raise
            sent, thrown = None, None
            try:
                sent = yield _Uncancellable(waited) if asyncio.isfuture(waited) else waited
            except asyncio.CancelledError:
                cancelled = True  # the future was not cancelled: the write resumes where it waited
            except BaseException as error:  # the future's own error, or a throw: the write's to handle
                thrown = error


class _Uncancellable:
    """A future as the task waiting on it sees it: the same wake-up, but `cancel()` refused."""

    __slots__ = ("_asyncio_future_blocking", "_future")

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self._future = future
        self._asyncio_future_blocking = True  # what asyncio's tasks take a future by

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._future.get_loop()

    def add_done_callback(
        self, callback: Callable[[asyncio.Future[Any]], object], *, context: Context | None = None
    ) -> None:
        self._future.add_done_callback(callback, context=context)

    def cancel(self, msg: Any = None) -> bool:
        return False
