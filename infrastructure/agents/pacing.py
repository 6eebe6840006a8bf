"""`take_turn`: the model calls of many coroutines on one event loop begun one per iteration of the
loop, so the loop's other tasks run between two of them.

Why: asyncio runs every callback that is ready in one iteration before it looks at its timers and
sockets again. A model call costs the loop 1.5-3 ms of the client's own Python before its request
is sent (the `openai` client's parameter transform and request building: 95% of an
`AsyncMemoryChat` turn's work on the loop), and the turns of an agent server come back from their
ledger hops together: 100 concurrent turns started their calls dozens to an iteration, and the
loop ran none of its other tasks for 150-400 ms. Begun one per iteration, a call waits for the ones
before it as it would have anyway (the loop does the same work), while a timer, a socket or
another coroutine of the loop is served between two of them. A call with nobody waiting before it
goes at once, in the same iteration.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque

__all__ = ["take_turn"]


class _Turns:
    """One event loop's queue of calls waiting to begin; its own thread is the only one to use it.
    It keeps no reference to the loop, its key in `_BY_LOOP`: a closed loop's queue goes with it."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._taken = False  # a call began in this iteration: the next waits for the next one

    async def take(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._taken:
            self._taken = True
            loop.call_soon(self._next, loop)
            return
        waiter = loop.create_future()
        self._waiting.append(waiter)
        await waiter  # a cancel leaves the waiter done: `_next` passes over it

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the first call still waiting begin (in the next iteration, when its task wakes),
        and look again in that iteration; with none waiting, the next call goes at once."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                loop.call_soon(self._next, loop)
                return
        self._taken = False


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()
_CREATING = threading.Lock()  # loops on several threads may ask for their queue at once


async def take_turn() -> None:
    """Wait until this call may begin: at once when no call of this loop began in this iteration,
    else after the ones waiting before it, one per iteration."""
    loop = asyncio.get_running_loop()
    turns = _BY_LOOP.get(loop)
    if turns is None:
        with _CREATING:
            turns = _BY_LOOP.setdefault(loop, _Turns())
    await turns.take(loop)
