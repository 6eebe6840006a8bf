"""What the google-adk and openai-agents adapters do with a session id that is taken (the ledger's
`SessionExists`), against the real SDKs, on memory, SQLite and PostgreSQL: google-adk's
`AlreadyExistsError` for a live or a deleted session and for the losers of a race to create one;
the openai-agents session appends to a session another writer created first, and refuses a deleted
one's id with `SessionExists`, storing nothing."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from sessionledger.domain import SessionExists
from sessionledger.infrastructure.adk import LedgerSessionService
from sessionledger.infrastructure.openai_agents import LedgerSession


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --- google-adk --------------------------------------------------------------------------------


def test_adk_a_taken_id_is_already_exists_error(database_url: str) -> None:
    async def scenario() -> None:
        app, sid = unique("app"), unique("s")
        async with LedgerSessionService(database_url) as adk:
            await adk.create_session(app_name=app, user_id="u", session_id=sid)
            with pytest.raises(AlreadyExistsError) as live:
                await adk.create_session(app_name=app, user_id="u", session_id=sid, state={"k": 1})
            assert str(live.value) == f"Session with id {sid} already exists."  # google-adk's text

            key = adk.ledger_id(app, "u", sid)
            await adk.delete_session(app_name=app, user_id="u", session_id=sid)
            records = await adk.service.records(key)
            with pytest.raises(AlreadyExistsError, match=r"already exists \(or existed") as deleted:
                await adk.create_session(app_name=app, user_id="u", session_id=sid)
            assert isinstance(deleted.value.__context__, SessionExists)  # the ledger's, translated
            assert await adk.service.records(key) == records
            assert await adk.get_session(app_name=app, user_id="u", session_id=sid) is None

    asyncio.run(scenario())


def test_adk_one_of_many_racing_creators_wins(database_url: str) -> None:
    async def scenario() -> None:
        app, sid = unique("app"), unique("s")
        async with LedgerSessionService(database_url) as adk:
            tries = [adk.create_session(app_name=app, user_id="u", session_id=sid) for _ in range(8)]
            results = await asyncio.gather(*tries, return_exceptions=True)
            created = [r for r in results if not isinstance(r, BaseException)]
            assert len(created) == 1, results
            assert all(isinstance(r, AlreadyExistsError) for r in results if r not in created), results

    asyncio.run(scenario())


def test_adk_other_refusals_stay_value_errors(database_url: str) -> None:
    async def scenario() -> None:
        async with LedgerSessionService(database_url, max_payload_bytes=1_000) as adk:
            with pytest.raises(ValueError, match="payload limit") as raised:
                await adk.create_session(app_name=unique("app"), user_id="u", state={"k": "x" * 2_000})
            assert not isinstance(raised.value, AlreadyExistsError)

    asyncio.run(scenario())


# --- openai-agents -----------------------------------------------------------------------------


def test_openai_a_deleted_sessions_id_is_session_exists_and_nothing_is_stored(database_url: str) -> None:
    async def scenario() -> None:
        sid = unique("s")
        session = LedgerSession(sid, database_url=database_url)
        try:
            await session.add_items([{"role": "user", "content": "first"}])
            await session.service.delete_session(sid)
            records = await session.service.records(sid)
            for items in (
                [{"role": "user", "content": "one"}],
                [{"role": "user", "content": f"{i}"} for i in "ab"],
            ):
                with pytest.raises(SessionExists, match="cannot create session"):
                    await session.add_items(items)
            assert await session.service.records(sid) == records
            assert await session.get_items() == []
        finally:
            await session.close()

    asyncio.run(scenario())


def test_openai_writers_racing_to_create_one_session_all_store(database_url: str) -> None:
    async def scenario() -> None:
        sid = unique("s")
        first = LedgerSession(sid, database_url=database_url)
        # memory:// is a ledger per LedgerSession: there the racers are six writes through one
        others = (
            []
            if database_url == "memory://"
            else [LedgerSession(sid, database_url=database_url) for _ in range(5)]
        )
        sessions = [first, *others]
        batches = [[{"role": "user", "content": f"{n}-{k}"} for k in range(1 + n % 2)] for n in range(6)]
        try:
            writers = (sessions * 6)[:6]  # one item (the loop's fast path) and two (a batch) alternate
            await asyncio.gather(*(s.add_items(batch) for s, batch in zip(writers, batches, strict=True)))
            stored = sorted(item["content"] for item in await first.get_items())
            assert stored == sorted(item["content"] for batch in batches for item in batch)
        finally:
            for session in sessions:
                await session.close()

    asyncio.run(scenario())
