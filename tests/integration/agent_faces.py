"""The agent classes' two faces, for one suite run against both: `face.SessionMemory(service, ...)`
is a `SessionMemory` on the synchronous face and, on the asynchronous one, an `AsyncSessionMemory`
seen through synchronous calls, each of its coroutines run to its end on an event loop of its own
thread (threads calling at once are coroutines running at once on that loop).

A test module imports the fixtures `face` and `service` (which replaces conftest's: on the async
face, the synchronous service is the one under the async service, so a test reads and writes the
same store the async classes do, `memory://` included). Arguments go to the async class as their
async twins: a service as its async service, a faced object as itself, an `openai.OpenAI` as an
`openai.AsyncOpenAI` to the same server. A class with no `Async` twin skips the test on that face.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import openai
import pytest
from sessionledger.infrastructure import SessionService, open_async_service, open_service
from sessionledger.infrastructure import agents as agent_classes
from sessionledger.infrastructure.async_service import AsyncSessionService


class LoopThread:
    """An event loop running on a thread of its own until `close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="agent-face-loop", daemon=True)
        self._thread.start()

    def run(self, awaitable: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(_awaited(awaitable), self.loop).result(timeout=120)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class Synced:
    """An async object's coroutine methods as synchronous ones (run on the face's loop); an async
    iterator they return comes back as an iterator; anything else of it is its own."""

    def __init__(self, target: Any, loop: LoopThread) -> None:
        self.target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.target, name)
        if not inspect.iscoroutinefunction(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            result = self._loop.run(value(*args, **kwargs))
            return _iterated(result, self._loop) if isinstance(result, AsyncIterator) else result

        return call


def _iterated(chunks: AsyncIterator[Any], loop: LoopThread) -> Iterator[Any]:
    """The chunks one by one; closing this iterator closes theirs (`aclose`), as the sync one is."""
    try:
        while True:
            try:
                chunk = loop.run(chunks.__anext__())
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        loop.run(chunks.aclose())  # type: ignore[attr-defined]  # an async generator's


class Face:
    """The classes of one face (`face.SessionMemory`, ...), and its services."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = LoopThread() if name == "async" else None
        self._services: dict[int, AsyncSessionService] = {}
        self._clients: dict[int, openai.AsyncOpenAI] = {}

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in agent_classes.__all__:
            raise AttributeError(name)
        if self.loop is None:
            return getattr(agent_classes, name)  # type: ignore[no-any-return]
        twin = getattr(agent_classes, f"Async{name}", None)
        if twin is None:
            pytest.skip(f"{name} has no async twin")
        loop = self.loop

        def make(*args: Any, **kwargs: Any) -> Synced:
            made = twin(*map(self._async, args), **{key: self._async(v) for key, v in kwargs.items()})
            return Synced(made, loop)

        return make

    def kind(self, name: str) -> Any:
        """The face's class or protocol `name` itself (`Advisor` is `AsyncAdvisor` on the async face)."""
        return getattr(agent_classes, f"Async{name}" if self.is_async else name)

    def unwrapped(self, faced: Any) -> Any:
        """The object itself (an async face's `Synced` is its target)."""
        return faced.target if isinstance(faced, Synced) else faced

    @contextlib.contextmanager
    def open_service(self, url: str, **options: Any) -> Iterator[SessionService]:
        """`open_service`; on the async face, the service under an async service opened so."""
        if self.loop is None:
            with open_service(url, **options) as service:
                yield service
            return
        async_service = open_async_service(url, **options)
        service = async_service.synchronous()
        self._services[id(service)] = async_service
        try:
            yield service
        finally:
            del self._services[id(service)]
            async_service.close()

    def _async(self, value: Any) -> Any:
        if isinstance(value, SessionService):
            return self._services[id(value)]
        if isinstance(value, Synced):
            return value.target
        if isinstance(value, openai.OpenAI):
            if id(value) not in self._clients:
                self._clients[id(value)] = openai.AsyncOpenAI(
                    base_url=str(value.base_url),
                    api_key=value.api_key,
                    max_retries=value.max_retries,
                    timeout=value.timeout,
                )
            return self._clients[id(value)]
        return value

    def close(self) -> None:
        if self.loop is None:
            return
        for client in self._clients.values():
            self.loop.run(client.close())
        self.loop.close()


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest) -> Iterator[Face]:
    """The synchronous classes, then the asynchronous ones through synchronous calls."""
    opened = Face(request.param)
    yield opened
    opened.close()


@pytest.fixture
def service(database_url: str, face: Face) -> Iterator[SessionService]:
    """The session service on memory, SQLite and PostgreSQL in turn, under the face's classes."""
    with face.open_service(database_url) as opened:
        yield opened
