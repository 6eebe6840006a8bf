"""`AsyncSessionService`: every `SessionService` method as a coroutine, run on a bounded thread pool.

Why threads and not a native async driver: a second, async ledger would be a second copy of every
write rule, hash chain and version check, and the synchronous core is already safe to share between
threads. Its database calls release the GIL while they wait (psycopg, sqlite3), so a pool of worker
threads overlaps them as an async driver would, and the event loop only hands work over and picks
results up (bench/bench_adapters_openai.py measures the loop's largest stall and the throughput of
many coroutines against one synchronous client). The hand-off is `thread_pool.ThreadPool`'s, half
the cost of `run_in_executor`'s.

The pool has `pool_size` threads (5 by default), one per pooled connection, or `async_threads`
when given. More threads overlap
more round trips but fight the event loop for the GIL: with 100 coroutines appending on PostgreSQL,
4 threads gave about 525 appends/s with the loop's median worst stall 13 ms (8 ms with the loop
idle, on a loaded 2-core machine), 8 threads 915/s and 21 ms, 15 threads 1,014/s and 50 ms (up to
460 ms). The stall is the target that matters to an agent's event loop, so the pool stays small;
`pool_size=` trades one for the other.

The common appends are sent from the loop itself: the one-event append on PostgreSQL and
MariaDB/MySQL (`append_event`, `append_message`) and an adapter's append of its entries and new
messages from the session's cached head (`append_entries`; `ledger/async_append.py`), made by the
synchronous path's own code and sent on the service's own asyncio connections (`pool_size` of
them), because the hop
around it cost 100-175 us on a quiet machine and over 500 us on a loaded one, and because many
coroutines appending at once through the threads kept the loop waiting for the GIL. A coroutine
waits for a free loop connection, and builds its event only then, so many appending at once build
theirs a few at a time; an append with an owner to check, or one the loop cannot make (another
loop holds the connections, a head that moved, a state delta), goes to the pool.

A cancelled call settles before `CancelledError` reaches its caller (`settling.py`): a write no
thread has begun, or still waiting for a loop connection, never happens; one under way is awaited
to its end first, so the caller's next read shows whether it was stored, for good.

Opening a durable ledger connects and may migrate its schema, so `open_async_service` only checks its
arguments; the service itself is opened on the pool by the first call (or `async with`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.entries import Entry, Forget
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import Message
from sessionledger.domain.records import Draft
from sessionledger.domain.write_plans import appended_event
from sessionledger.infrastructure.bootstrap import check_database_url, open_storage, service_settings
from sessionledger.infrastructure.service import (
    AppendSteps,
    SessionService,
    append_event_result,
    append_message_result,
)
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.thread_pool import ThreadPool
from sessionledger.infrastructure.tracing import APPEND, record_span

if TYPE_CHECKING:
    from pathlib import Path

    from sessionledger.infrastructure.ledger.async_append import AsyncAppend
    from sessionledger.infrastructure.policies import PolicyBook

P = ParamSpec("P")
R = TypeVar("R")


def open_async_service(
    database_url: str | None = None,
    *,
    broker_url: str | None = None,
    compaction: str = "workers",
    policy: str | Path | None = None,
    **options: Any,
) -> AsyncSessionService:
    """`open_service`'s arguments and meaning, as an `AsyncSessionService`; close it with `aclose()`
    (or use `async with`). Bad options, malformed URLs and a bad `policy` are a `ValueError` here,
    at once; the database is first reached by the first call, off the event loop. With
    `compaction="background"` the compactor's thread starts with the service, at that first call,
    and `aclose()` drains it (off the loop)."""
    settings, background = service_settings(database_url, broker_url, compaction, policy, options)
    check_database_url(settings)
    return AsyncSessionService(settings, background=background)


def _async_twin(
    method: Callable[Concatenate[SessionService, P], R],
) -> Callable[Concatenate[AsyncSessionService, P], Coroutine[Any, Any, R]]:
    """The coroutine that runs `SessionService.<method>` on the service's pool: same arguments,
    same result, same exceptions."""

    async def twin(self: AsyncSessionService, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.run(lambda service: method(service, *args, **kwargs))

    functools.update_wrapper(twin, method)
    return twin


class AsyncSessionService:
    """The asynchronous face of one `SessionService`: each method awaits the synchronous one, which
    runs on this service's own bounded thread pool, so no call blocks the event loop.

    It is not bound to an event loop: one instance may serve several loops, one after the other or
    at once (it is as thread-safe as the service).
    """

    def __init__(self, settings: Settings, *, background: PolicyBook | None = None) -> None:
        """Built by `open_async_service`; the synchronous service is opened by the first call (with
        a background compactor running `background`'s policies, if given)."""
        self._settings = settings
        self._background = background
        self._pool = ThreadPool(settings.async_threads or settings.pool_size, "sessionledger-async")
        self._opening = threading.Lock()
        self._service: SessionService | None = None
        self._fast_append: AsyncAppend | None = None
        self._fast_append_of: Callable[[float, int], AsyncAppend | None] | None = None  # `_loop_append`
        self._owns_service = True
        self._closed = False

    @classmethod
    def around(cls, service: SessionService) -> AsyncSessionService:
        """The asynchronous face of an open synchronous `service` (its settings), on a pool of its
        own: for an adapter given one service that has coroutines too (LangGraph's checkpointer).
        Closing it stops its pool and its loop connections and leaves `service` open: whoever
        opened it closes it."""
        face = cls(service.settings)
        face._service = service
        face._owns_service = False
        # a SQL ledger's (`ledger/sql.py`); a memory ledger has none
        face._fast_append_of = getattr(service.ledger, "async_append", None)
        return face

    def _loop_append(self) -> AsyncAppend | None:
        """The appends from the loop, made at their first use once the service is open: a
        replicated ledger, told then that writes pass elsewhere, has every replica read ask the
        primary how far it wrote, which a caller that never appends from a loop (a LangGraph
        checkpointer used synchronously) should not pay for."""
        if self._fast_append is None and self._fast_append_of is not None:
            with self._opening:
                made_of, self._fast_append_of = self._fast_append_of, None
                if made_of is not None and not self._closed:
                    self._fast_append = made_of(self._settings.statement_timeout, self._settings.pool_size)
        return self._fast_append

    def synchronous(self) -> SessionService:
        """The synchronous service this one runs its calls on, opened now if it is not yet (it
        connects and may migrate: not from an event loop): for an adapter with a synchronous and
        an asynchronous face on one ledger (LangGraph's checkpointer), which must share it (a
        `memory://` ledger is a fresh one per open)."""
        if self._closed:
            raise RuntimeError("the async session service is closed")
        return self._opened()

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def broker_url(self) -> str | None:
        """The workers' queue, as configured: the service publishes nothing itself (the relay tails
        the ledger), so workers on the same database compact its sessions whatever this is."""
        return self._settings.broker_url

    def _opened(self) -> SessionService:
        """The synchronous service, opened on first use (on a pool thread: it connects, may migrate)."""
        service = self._service
        if service is None:
            with self._opening:
                if self._closed:
                    raise RuntimeError("the async session service is closed")
                if self._service is None:
                    storage = open_storage(self._settings, background=self._background, index_text=True)
                    self._service = storage.service
                    self._fast_append_of = storage.async_append  # made at its first use, as `around`'s
                service = self._service
        return service

    async def _append(
        self,
        user_id: str | None,
        whole: Callable[[SessionService], R],
        draft_of: Callable[[AppendSteps], Draft],
        result: Callable[[Draft, AppendOutcome], R],
    ) -> R:
        """An append from the loop when it can be (no owner to check, a connection of this loop):
        the draft built there (`draft_of(steps)`) once a connection is free, and its answer
        `result(draft, outcome)`; else `whole(service)` on the pool. A draft the loop could not
        append is stored on the pool, by the same steps."""
        fast = self._loop_append()
        made = None
        started = time.time_ns()
        if user_id is None and fast is not None and not self._closed:
            steps = self._opened().append_steps
            made = await fast.append(lambda: draft_of(steps))
        if made is None:
            return await self.run(whole)
        draft, outcome = made
        if outcome is None:
            outcome = await self.run(lambda service: service.append_steps.store(draft))
        else:
            session_id = appended_event(draft).session_id
            steps.announce(session_id, outcome)
            attributes = {
                "sessionledger.session_id": session_id,
                "sessionledger.outcome": outcome.name.lower(),
            }
            record_span(APPEND, started, attributes)  # the pool's path is traced by `store`
        return result(draft, outcome)

    async def run(self, call: Callable[[SessionService], R]) -> R:
        """`call(service)` on the pool, awaited: for work that needs several service calls in one
        thread hop (an adapter's read-then-write). The caller's context variables go with it. A
        cancel withdraws `call` while no thread has begun it, else is raised once it has ended."""
        if self._closed:
            raise RuntimeError("the async session service is closed")
        return await self._pool.run(lambda: call(self._opened()))

    def close(self) -> None:
        """`aclose()` for synchronous code (never from an event loop, as it waits for the calls)."""
        if self._closed:
            return
        self._closed = True
        self._shutdown()

    async def aclose(self) -> None:
        """Wait for the calls in flight, then close the service; later calls raise `RuntimeError`.
        Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        with self._opening:  # none is made after this (`_loop_append`)
            fast = self._fast_append
        if fast is not None:
            fast.close()
        self._pool.shutdown()
        with self._opening:
            if self._service is not None and self._owns_service:
                self._service.close()

    async def __aenter__(self) -> AsyncSessionService:
        """Opens the service now, so a database that cannot be used fails here, not at first use."""
        await self.run(lambda service: None)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- the service's methods (docs/api.md "SessionService"), one twin each ----------------------

    create_session = _async_twin(SessionService.create_session)
    get_session = _async_twin(SessionService.get_session)
    list_sessions = _async_twin(SessionService.list_sessions)
    recent_sessions = _async_twin(SessionService.recent_sessions)
    delete_session = _async_twin(SessionService.delete_session)
    delete_expired_sessions = _async_twin(SessionService.delete_expired_sessions)

    async def append_event(
        self, event: SessionEvent, *, user_id: str | None = None, expected_version: int | None = None
    ) -> bool:
        """`SessionService.append_event`; the common append is sent from the loop, without a thread."""
        return await self._append(
            user_id,
            lambda service: service.append_event(event, user_id=user_id, expected_version=expected_version),
            lambda steps: steps.draft_event(event, expected_version),
            lambda _, outcome: append_event_result(event, expected_version, outcome),
        )

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        branch: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        state_delta: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> SessionEvent:
        """`SessionService.append_message`; the common append is sent from the loop, as `append_event`'s."""
        return await self._append(
            user_id,
            lambda service: service.append_message(
                session_id,
                message,
                branch=branch,
                metadata=metadata,
                state_delta=state_delta,
                user_id=user_id,
            ),
            lambda steps: steps.draft_message(session_id, message, branch, metadata, state_delta),
            append_message_result,
        )

    ingest = _async_twin(SessionService.ingest)

    async def append_entries(
        self,
        session_id: str,
        entries: Iterable[Entry | Forget],
        *,
        events: Iterable[SessionEvent] = (),
        user_id: str | None = None,
    ) -> list[AppendOutcome]:
        """`SessionService.append_entries`; an adapter's common append (one session's entries and
        new messages from its cached head) is sent from the loop, as `append_event`'s."""
        fast = self._loop_append()
        if user_id is None and fast is not None and not self._closed:
            steps = self._opened().append_steps
            drafts, held = steps.draft_entries(session_id, entries, events)
            outcomes = await fast.append_on_head(drafts) if drafts else []
            if outcomes is not None:
                answers = outcomes[:held]
                steps.announce(session_id, *answers)
                return answers
            return await self.run(
                lambda service: service.append_steps.store_entries(session_id, drafts, held)
            )
        return await self.run(
            lambda service: service.append_entries(session_id, entries, events=events, user_id=user_id)
        )

    entries = _async_twin(SessionService.entries)
    entry_log = _async_twin(SessionService.entry_log)
    get_events = _async_twin(SessionService.get_events)
    get_messages = _async_twin(SessionService.get_messages)
    window_payloads = _async_twin(SessionService.window_payloads)
    event_version = _async_twin(SessionService.event_version)
    get_app_state = _async_twin(SessionService.get_app_state)
    get_user_state = _async_twin(SessionService.get_user_state)
    window_stats = _async_twin(SessionService.window_stats)
    fill_token_counts = _async_twin(SessionService.fill_token_counts)
    compact = _async_twin(SessionService.compact)
    rewind = _async_twin(SessionService.rewind)
    records = _async_twin(SessionService.records)
    replay = _async_twin(SessionService.replay)
