"""AsyncSessionService: every SessionService method as a coroutine, on memory, SQLite and PostgreSQL;
many coroutines at once lose nothing; the event loop keeps ticking while appends run."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sessionledger.domain import SessionEvent, SessionNotFound, UserMessage
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.compaction import EventCountTrigger, SlidingWindowStrategy
from sessionledger.infrastructure import AsyncSessionService, SessionService, open_async_service, open_service

from bench.timing import largest_stall
from sessionledger import open_async_service as top_level_open_async_service
from tests.conftest import SQL_BACKENDS, sql_url


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def public_methods(cls: type) -> set[str]:
    return {
        name
        for name, value in vars(cls).items()
        if not name.startswith("_") and callable(value) and not isinstance(value, property)
    }


# closing is `aclose`; watching appends is the composition root's wiring (`open_async_service(
# compaction="background")`), not a call an application makes
NOT_TWINNED = {"close", "watch_appends"}


def test_every_public_service_method_has_an_async_twin_with_its_signature() -> None:
    missing = public_methods(SessionService) - NOT_TWINNED - public_methods(AsyncSessionService)
    assert not missing, f"SessionService methods without an async twin: {sorted(missing)}"
    for name in public_methods(SessionService) - NOT_TWINNED:
        twin = getattr(AsyncSessionService, name)
        assert inspect.iscoroutinefunction(twin), name
        sync_parameters = list(inspect.signature(getattr(SessionService, name)).parameters)
        assert list(inspect.signature(twin).parameters) == sync_parameters, name
    assert inspect.iscoroutinefunction(AsyncSessionService.aclose)
    assert top_level_open_async_service is open_async_service


def test_bad_arguments_fail_at_once_without_reaching_a_database() -> None:
    with pytest.raises(ValueError):
        open_async_service("memory://", no_such_option=1)
    with pytest.raises(ValueError):
        open_async_service("sqlite:////no/such/directory/ledger.db")


def run(coroutine_function: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(coroutine_function())  # type: ignore[arg-type]  # a coroutine in practice


def test_every_method_through_the_async_api(database_url: str) -> None:
    async def scenario() -> None:
        async with open_async_service(database_url) as service:
            user, app = unique("u"), unique("app")
            session = await service.create_session(
                user, app_name=app, state={"app:k": 1, "user:k": 2, "s": 3}
            )
            assert await service.get_session(session.id) == session
            assert await service.get_session(session.id, user_id=unique("other")) is None
            assert [s.id for s in await service.list_sessions(user)] == [session.id]
            with pytest.raises(ValueError):
                await service.create_session(user, session_id=session.id)

            first = SessionEvent(session_id=session.id, message=UserMessage("hello"), invocation_id="one")
            assert await service.append_event(first) is True
            assert await service.append_event(first) is False
            with pytest.raises(SessionNotFound):
                await service.append_event(SessionEvent(session_id=unique("none"), message=UserMessage("x")))
            stored = await service.append_message(session.id, UserMessage("second"), state_delta={"s": 4})
            outcomes = await service.ingest(
                [
                    SessionEvent(session_id=session.id, message=UserMessage(f"m{i}"), invocation_id="two")
                    for i in range(3)
                ]
            )
            assert outcomes == [AppendOutcome.STORED] * 3
            assert [e.id for e in (await service.get_events(session.id))[:2]] == [first.id, stored.id]
            assert [m.text for m in await service.get_messages(session.id)] == [
                "hello",
                "second",
                "m0",
                "m1",
                "m2",
            ]
            assert await service.event_version(session.id) == 5
            assert await service.get_app_state(app) == {"k": 1}
            assert await service.get_user_state(user, app_name=app) == {"k": 2}

            stats = await service.window_stats(session.id)
            assert stats is not None and stats.events == 5
            assert await service.fill_token_counts(session.id) == 5
            result = await service.compact(
                session.id, EventCountTrigger(1), SlidingWindowStrategy(max_events=3)
            )
            assert [e.id for e in result.archived][:1] == [first.id]
            assert len(await service.get_messages(session.id)) == len(result.compacted)
            version = await service.event_version(session.id)
            assert await service.rewind(session.id, "two") == version + 1
            assert "m0" not in [m.text for m in await service.get_messages(session.id)]
            with pytest.raises(LookupError):
                await service.rewind(session.id, "never")

            records = await service.records(session.id)
            assert [r.kind for r in records][:1] == ["created"] and records[-1].kind == "rewind"
            projection = await service.replay(session.id)
            assert projection.version == await service.event_version(session.id)

            await service.delete_session(session.id)
            assert await service.get_session(session.id) is None
            assert await service.get_events(session.id) == []
            expiring = await service.create_session(user, ttl=timedelta(seconds=1))
            assert await service.delete_expired_sessions(datetime.now(UTC) + timedelta(seconds=2)) >= 1
            assert await service.get_session(expiring.id) is None
            with pytest.raises(ValueError, match="ttl must be positive"):
                await service.create_session(user, ttl=timedelta(seconds=-1))

    run(scenario)


def test_a_closed_service_refuses_calls_and_closing_twice_is_harmless() -> None:
    async def scenario() -> None:
        service = open_async_service("memory://")
        session = await service.create_session("u")
        await service.aclose()
        await service.aclose()
        with pytest.raises(RuntimeError):
            await service.get_session(session.id)

    run(scenario)


def test_many_coroutines_appending_at_once_lose_nothing(database_url: str) -> None:
    sessions, writers, per_writer = 4, 40, 5

    async def scenario() -> None:
        async with open_async_service(database_url) as service:
            ids = [(await service.create_session(unique("u"))).id for _ in range(sessions)]

            async def writer(number: int) -> None:
                for i in range(per_writer):
                    await service.append_message(ids[number % sessions], UserMessage(f"{number}-{i}"))

            await asyncio.gather(*(writer(n) for n in range(writers)))
            for index, session_id in enumerate(ids):
                texts = [m.text for m in await service.get_messages(session_id)]
                expected = {f"{n}-{i}" for n in range(index, writers, sessions) for i in range(per_writer)}
                assert sorted(texts) == sorted(expected)
                assert await service.event_version(session_id) == len(expected)
                for n in range(index, writers, sessions):  # each writer's own order is kept
                    mine = [t for t in texts if t.startswith(f"{n}-")]
                    assert mine == [f"{n}-{i}" for i in range(per_writer)]

    run(scenario)


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_the_event_loop_keeps_ticking_while_appends_run(backend: str, request: pytest.FixtureRequest) -> None:
    url = sql_url(request, backend, shared=True)

    async def scenario() -> tuple[float, float]:
        async with open_async_service(url) as service:
            ids = [(await service.create_session(unique("u"))).id for _ in range(20)]

            async def appends() -> None:
                async def one_session(session_id: str) -> None:
                    for i in range(10):
                        await service.append_message(session_id, UserMessage(f"m{i}"))

                await asyncio.gather(*(one_session(s) for s in ids))

            async_stall = await largest_stall(appends)
            for session_id in ids:
                assert await service.event_version(session_id) == 10

        with open_service(url) as blocking:  # the same appends on the loop itself: the ticker sees them
            session_id = blocking.create_session(unique("u")).id

            async def blocking_appends() -> None:
                for i in range(50):
                    blocking.append_message(session_id, UserMessage(f"m{i}"))

            sync_stall = await largest_stall(blocking_appends)
        return async_stall, sync_stall

    async_stall, sync_stall = run(scenario)
    assert sync_stall > async_stall
    assert async_stall < 0.05, f"the event loop stalled {async_stall * 1000:.1f} ms"


@pytest.mark.parametrize(("options", "threads"), [({"async_threads": 1}, 1), ({"pool_size": 3}, 3)])
def test_async_threads_bounds_the_threads_that_run_the_calls(options: dict[str, int], threads: int) -> None:
    """`async_threads` is how many threads run the synchronous calls (each one more thread that the
    event loop waits on for the GIL); without it, `pool_size`."""
    names: set[str] = set()

    def held(service: SessionService) -> None:
        names.add(threading.current_thread().name)
        time.sleep(0.05)  # long enough that every free thread takes a call

    async def main() -> None:
        async with open_async_service("memory://", **options) as service:
            await asyncio.gather(*(service.run(held) for _ in range(8)))

    asyncio.run(main())
    assert len(names) == threads
