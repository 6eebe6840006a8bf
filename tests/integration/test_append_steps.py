"""The service's public steps and reads that the async service and the openai-agents session use
(`append_steps`: drafting and storing apart; `window_payloads`), on memory, SQLite and PostgreSQL:
the same checks and outcomes as the whole methods, and the same isolation as the other reads."""

from __future__ import annotations

import asyncio

import pytest
from sessionledger.domain import EventFilter, SessionEvent, SessionNotFound, UserMessage
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.codec import event_to_payload
from sessionledger.domain.compaction import CompactionResult
from sessionledger.domain.write_plans import appended_event
from sessionledger.infrastructure import SessionService, open_async_service

from tests.fakes.compaction import Always


def test_drafting_reads_nothing_and_checks_as_an_append_does(service: SessionService, unique) -> None:
    steps = service.append_steps
    unknown = unique("never-created")
    draft = steps.draft_message(unknown, UserMessage("hi"), metadata={"k": 1}, state_delta={"temp:t": 1})
    event = appended_event(draft)
    assert (event.session_id, event.message, dict(event.metadata), dict(event.state_delta)) == (
        unknown,
        UserMessage("hi"),
        {"k": 1},
        {},
    )
    assert service.get_session(unknown) is None  # drafting an unknown session's event is no error
    with pytest.raises(ValueError, match="message must be a Message"):
        steps.draft_message(unknown, "hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session_id"):
        steps.draft_message(" ", UserMessage("hi"))
    with pytest.raises(ValueError, match="event must be a SessionEvent"):
        steps.draft_event("not an event")  # type: ignore[arg-type]
    assert steps.draft_event(event, 3).expected_version == 3
    assert steps.store(draft) is AppendOutcome.NO_SESSION


def test_storing_a_draft_is_an_append(service: SessionService, unique) -> None:
    owner, steps = unique("u"), service.append_steps
    sid = service.create_session(owner).id
    draft = steps.draft_event(SessionEvent(session_id=sid, message=UserMessage("one")))
    assert steps.store(draft, owner) is AppendOutcome.STORED
    assert steps.store(draft) is AppendOutcome.DUPLICATE
    stale = steps.draft_message(sid, UserMessage("two"))
    assert steps.store(steps.draft_event(appended_event(stale), 0)) is AppendOutcome.CONFLICT
    with pytest.raises(ValueError, match="does not belong to user"):
        steps.store(stale, unique("intruder"))
    assert [m.text for m in service.get_messages(sid)] == ["one"]
    assert service.event_version(sid) == 1


def test_window_payloads_are_the_windows_for_its_owner_only(service: SessionService, unique) -> None:
    owner = unique("u")
    sid = service.create_session(owner).id
    for text in ("a", "b", "c"):
        service.append_message(sid, UserMessage(text))
    service.compact(sid, Always(), _DropOldest())
    window = service.get_events(sid, EventFilter.active())
    expected = [event_to_payload(e) for e in window]
    assert [m["message"]["text"] for m in expected] == ["b", "c"]
    assert service.window_payloads(sid, dict) == expected
    assert service.window_payloads(sid, dict, user_id=owner) == expected
    assert service.window_payloads(sid, dict, user_id=unique("other")) == []
    assert service.window_payloads(unique("missing"), dict) == []
    with pytest.raises(ValueError, match="session_id"):
        service.window_payloads("", dict)


def test_the_async_twin_reads_the_same_payloads(database_url: str, unique) -> None:
    async def scenario() -> None:
        async with open_async_service(database_url) as service:
            owner = unique("u")
            sid = (await service.create_session(owner)).id
            await service.append_message(sid, UserMessage("x"))
            assert [
                p["message"]["text"] for p in await service.window_payloads(sid, dict, user_id=owner)
            ] == ["x"]
            assert await service.window_payloads(sid, dict, user_id=unique("other")) == []
            with pytest.raises(SessionNotFound):
                await service.append_message(unique("missing"), UserMessage("x"))

    asyncio.run(scenario())


class _DropOldest:
    def compact(self, request) -> CompactionResult:
        return CompactionResult(request.events[1:], request.events[:1])
