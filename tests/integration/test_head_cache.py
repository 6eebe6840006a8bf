"""The ledger's head cache is bounded (`heads.KEPT_HEADS`): a long-lived process keeps the heads of
the sessions it wrote to last, and a session whose head it forgot appends as before, its head read
again, through each append path (one event, an adapter's entries, a batch, from an event loop)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.entries import Entry
from sessionledger.domain.write_plans import LedgerHead
from sessionledger.infrastructure import open_async_service, open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.ledger import heads
from sessionledger.infrastructure.ledger.heads import HeadCache

from tests.conftest import SQL_BACKENDS, sql_url

SESSIONS, ROUNDS = 4, 3


@pytest.fixture
def two_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ledgers opened in the test remember two sessions' heads."""
    monkeypatch.setattr(heads, "KEPT_HEADS", 2)


def head(position: int) -> LedgerHead:
    return LedgerHead(position, f"hash {position}", position)


@pytest.mark.usefixtures("two_heads")
def test_the_head_kept_least_recently_is_forgotten_first() -> None:
    cache = HeadCache()
    cache.keep("a", head(1))
    cache.keep("b", head(1))
    cache.keep("a", head(2))  # a kept again: b is now the least recent
    cache.keep("c", head(1))
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (head(2), None, head(1))
    cache.keep("a", head(1))  # an older head (a writer finishing late) is not kept, and forgets nothing
    assert (cache.get("a"), cache.get("c")) == (head(2), head(1))


@pytest.mark.usefixtures("two_heads")
@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_sessions_whose_heads_were_forgotten_append_as_before(
    backend: str, request: pytest.FixtureRequest
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with open_service(sql_url(request, backend, shared=True)) as service:
        sessions = [service.create_session(user).id for _ in range(SESSIONS)]
        for turn in range(ROUNDS):  # round-robin over twice as many sessions as heads kept
            for sid in sessions:
                service.append_message(sid, UserMessage(f"{sid} {turn}"))
                service.append_entries(sid, [Entry("note", f"k{turn}", {"turn": turn})])
                service.ingest(
                    [SessionEvent(session_id=sid, message=UserMessage(f"{sid} {turn} {x}")) for x in "ab"]
                )
        for sid in sessions:
            texts = [
                text
                for turn in range(ROUNDS)
                for text in (f"{sid} {turn}", f"{sid} {turn} a", f"{sid} {turn} b")
            ]
            assert [m.text for m in service.get_messages(sid)] == texts
            assert [e.key for e in service.entries(sid, "note")] == [f"k{t}" for t in reversed(range(ROUNDS))]
            assert verify(service, sid).ok


@pytest.mark.usefixtures("two_heads")
@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_appends_from_an_event_loop_read_a_forgotten_head_again(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = sql_url(request, backend, shared=True)

    async def run() -> None:
        async with open_async_service(url) as service:
            sessions = [(await service.create_session("u")).id for _ in range(SESSIONS)]
            for turn in range(ROUNDS):
                for sid in sessions:
                    await service.append_message(sid, UserMessage(f"{sid} {turn}"))
                    await service.append_entries(sid, [Entry("note", f"k{turn}", {"turn": turn})])
            for sid in sessions:
                messages = await service.get_messages(sid)
                assert [m.text for m in messages] == [f"{sid} {turn}" for turn in range(ROUNDS)]
                assert (await service.run(lambda synchronous, sid=sid: verify(synchronous, sid))).ok

    asyncio.run(run())
