"""`SessionService.entry_log` (the ledger's `entry_log`), one suite run on memory, SQLite and
PostgreSQL: the entry and forget records after a position, oldest first, by type and key prefix,
and a session's erasure as a forget of everything; applied in order, they give `entries`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence

import pytest
from sessionledger.domain.entries import Entry, EntryRow, Forget
from sessionledger.infrastructure import SessionService, open_async_service, open_service


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


@pytest.fixture
def session_id(service: SessionService) -> str:
    return service.create_session("ada", app_name="adapters", session_id=f"log-{uuid.uuid4().hex[:10]}").id


def said(rows: Sequence[EntryRow]) -> list[tuple[str, object]]:
    return [
        ("entry", row.entry.key) if row.entry is not None else ("forget", row.forget and row.forget.keys)
        for row in rows
    ]


def test_the_log_after_a_position_is_what_was_written_since_oldest_first(
    service: SessionService, session_id: str
) -> None:
    service.append_entries(session_id, [Entry("item", "a", {"v": 1}), Entry("item", "b", {"v": 2})])
    first = service.entry_log(session_id, "item")
    assert said(first) == [("entry", "a"), ("entry", "b")]
    assert first[0].position < first[1].position and first[1].entry is not None
    assert first[1].entry.value == {"v": 2}

    service.append_entries(
        session_id,
        [Forget("item", keys=("a",)), Entry("other", "a", {"v": 3}), Entry("item", "c", {"v": 4})],
    )
    since = service.entry_log(session_id, "item", after=first[-1].position)
    assert said(since) == [("forget", ("a",)), ("entry", "c")]  # other types left out, forgets kept
    assert service.entry_log(session_id, "item", after=since[-1].position) == []
    assert said(service.entry_log(session_id, ["item", "other"], prefix="a")) == [
        ("entry", "a"),
        ("forget", ("a",)),
        ("entry", "a"),
    ]


def test_applying_the_log_gives_the_live_entries(service: SessionService, session_id: str) -> None:
    service.append_entries(session_id, [Entry("item", f"k{i}", {"i": i}) for i in range(4)])
    service.append_entries(session_id, [Forget("item", prefix="k1"), Entry("item", "k2", {"i": 20})])
    service.append_entries(session_id, [Forget("item", keys=("k0",)), Entry("item", "k0", {"i": 0})])
    live: dict[str, object] = {}
    for row in service.entry_log(session_id, "item"):
        if row.entry is not None:
            live[row.entry.key] = row.entry.value
        elif row.forget is not None:
            live = {k: v for k, v in live.items() if not row.forget.matches("item", k)}
    newest = {}
    for entry in service.entries(session_id, "item"):
        newest.setdefault(entry.key, entry.value)
    assert live == newest == {"k0": {"i": 0}, "k2": {"i": 20}, "k3": {"i": 3}}


def test_a_deleted_session_logs_its_erasure_and_unknown_sessions_log_nothing(
    service: SessionService, session_id: str
) -> None:
    service.append_entries(session_id, [Entry("item", "a", {"v": 1})])
    seen = service.entry_log(session_id, "item")
    service.delete_session(session_id)
    erased = service.entry_log(session_id, "item", after=seen[-1].position)
    assert len(erased) == 1 and erased[0].forget == Forget() and erased[0].position > seen[-1].position
    assert service.entry_log(session_id, "item") == erased  # the erased entries are gone from the log
    assert service.entry_log("no-such-session", "item") == []


def test_another_users_log_is_empty_and_arguments_are_checked(
    service: SessionService, session_id: str
) -> None:
    service.append_entries(session_id, [Entry("item", "a", {"v": 1})])
    assert service.entry_log(session_id, "item", user_id="grace") == []
    assert said(service.entry_log(session_id, "item", user_id="ada")) == [("entry", "a")]
    for wrong in (-1, 1.5, "3"):
        with pytest.raises(ValueError, match="after"):
            service.entry_log(session_id, "item", after=wrong)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="types"):
        service.entry_log(session_id, [])


def test_the_async_service_has_the_twin(database_url: str) -> None:
    async def story() -> list[tuple[str, object]]:
        async with open_async_service(database_url) as service:
            session = await service.create_session("ada", app_name="adapters")
            await service.append_entries(session.id, [Entry("item", "a", {"v": 1})])
            return said(await service.entry_log(session.id, "item"))

    assert asyncio.run(story()) == [("entry", "a")]
