"""LedgerSessionService behaves as google-adk's own session services do, on memory, SQLite and
PostgreSQL: one test per behaviour google-adk's session-service tests check, plus the ledger's own
guarantees (compaction never makes a session stale, rewind keeps the audit trail)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types
from sessionledger.domain.compaction.strategies import RecursiveSummarizationStrategy, SlidingWindowStrategy
from sessionledger.domain.compaction.triggers import EventCountTrigger, TurnCountTrigger
from sessionledger.domain.messages import UserMessage
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.adk import LedgerSessionService

T = TypeVar("T")


def run_with(database_url: str, body: Callable[[LedgerSessionService, str], Awaitable[T]]) -> T:
    """`body(service, app_name)` on a fresh service; the app name is the test's own (shared databases)."""

    async def main() -> T:
        async with LedgerSessionService(database_url) as service:
            return await body(service, f"app-{uuid.uuid4().hex[:8]}")

    return asyncio.run(main())


def text_event(text: str, *, author: str = "user", **fields: Any) -> Event:
    role = "user" if author == "user" else "model"
    return Event(author=author, content=types.Content(role=role, parts=[types.Part(text=text)]), **fields)


def delta(**state: Any) -> EventActions:
    return EventActions(state_delta=state)


# --- sessions ---------------------------------------------------------------------------------


def test_unknown_session_reads_as_none(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        assert await service.get_session(app_name=app, user_id="u", session_id="nope") is None
        assert await service.get_session(app_name=app, user_id="u", session_id="  ") is None

    run_with(database_url, body)


def test_create_get_delete(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        before = datetime.now().timestamp()
        created = await service.create_session(app_name=app, user_id="u", state={"key": "value"})
        assert (created.app_name, created.user_id, created.state, created.events) == (
            app,
            "u",
            {"key": "value"},
            [],
        )
        assert uuid.UUID(created.id)
        assert before - 1 <= created.last_update_time <= datetime.now().timestamp()
        got = await service.get_session(app_name=app, user_id="u", session_id=created.id)
        assert got == created  # fields and the private stale marker
        await service.delete_session(app_name=app, user_id="u", session_id=created.id)
        assert await service.get_session(app_name=app, user_id="u", session_id=created.id) is None
        await service.delete_session(app_name=app, user_id="u", session_id=created.id)  # no-op
        await service.delete_session(app_name=app, user_id="u", session_id="never-was")

    run_with(database_url, body)


def test_session_ids_are_stripped_generated_when_blank_and_unique(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        padded = await service.create_session(app_name=app, user_id="u", session_id="  s1\n")
        assert padded.id == "s1"
        assert (await service.get_session(app_name=app, user_id="u", session_id=" s1 ")).id == "s1"
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=app, user_id="u", session_id="s1 ")
        blank = await service.create_session(app_name=app, user_id="u", session_id="   ")
        assert uuid.UUID(blank.id)

    run_with(database_url, body)


def test_a_session_another_api_made_at_an_adk_id_is_missing_here_and_left_alone(database_url):
    """The core service (as openai-agents and LangGraph) takes raw ids: Mallory may make a session
    whose id is Alice's ADK id. Alice's reads find nothing, her delete and append touch nothing."""

    async def body(service: LedgerSessionService, app: str) -> None:
        key = service.ledger_id(app, "alice", "s1")
        await service.service.create_session("mallory", session_id=key, app_name="openai-agents")
        await service.service.append_message(key, UserMessage("planted by mallory"))
        assert await service.get_session(app_name=app, user_id="alice", session_id="s1") is None
        await service.delete_session(app_name=app, user_id="alice", session_id="s1")
        made_by_hand = Session(id="s1", app_name=app, user_id="alice")
        with pytest.raises(SessionNotFoundError):
            await service.append_event(made_by_hand, text_event("mine", invocation_id="inv1"))
        kept = await service.service.get_session(key)
        assert kept is not None and kept.user_id == "mallory"
        assert [m.text for m in await service.service.get_messages(key)] == ["planted by mallory"]
        with pytest.raises(AlreadyExistsError):  # the id is taken; its session is not shown
            await service.create_session(app_name=app, user_id="alice", session_id="s1")

    run_with(database_url, body)


def test_the_same_session_id_for_two_users_is_two_sessions(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        first = await service.create_session(app_name=app, user_id="u1", session_id="s1")
        await service.append_event(first, Event(invocation_id="inv1", author="user"))
        await service.create_session(app_name=app, user_id="u2", session_id="s1")
        other = await service.get_session(app_name=app, user_id="u2", session_id="s1")
        assert (other.user_id, other.events) == ("u2", [])
        assert await service.get_session(app_name=f"{app}-other", user_id="u1", session_id="s1") is None
        assert len((await service.get_session(app_name=app, user_id="u1", session_id="s1")).events) == 1

    run_with(database_url, body)


def test_list_sessions_per_user_and_for_every_user(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        for user, sid in (("u1", "a"), ("u1", "b"), ("u2", "c")):
            await service.create_session(app_name=app, user_id=user, session_id=sid, state={"key": sid})
        late = await service.get_session(app_name=app, user_id="u1", session_id="a")
        await service.append_event(late, Event(author="user", actions=delta(**{"user:n": 1})))
        mine = (await service.list_sessions(app_name=app, user_id="u1")).sessions
        assert [s.id for s in mine] == ["b", "a"]  # oldest update first: "a" was updated last
        assert {s.id: s.state for s in mine} == {
            "a": {"key": "a", "user:n": 1},
            "b": {"key": "b", "user:n": 1},
        }
        assert all(s.events == [] for s in mine)
        every = (await service.list_sessions(app_name=app)).sessions
        assert [(s.user_id, s.id) for s in every] == [("u1", "b"), ("u2", "c"), ("u1", "a")]
        assert every[1].state == {"key": "c"}
        assert (await service.list_sessions(app_name=f"{app}-none")).sessions == []

    run_with(database_url, body)


# --- state -----------------------------------------------------------------------------------


def test_app_user_and_session_state_scopes(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        s1 = await service.create_session(
            app_name=app, user_id="u1", session_id="s1", state={"app:k1": "v1", "user:k1": "u", "sk": 1}
        )
        await service.append_event(s1, Event(author="user", actions=delta(**{"app:k2": "v2", "user:k2": 2})))
        same_user = await service.create_session(app_name=app, user_id="u1", session_id="s1b")
        assert same_user.state == {"app:k1": "v1", "app:k2": "v2", "user:k1": "u", "user:k2": 2}
        other_user = await service.create_session(app_name=app, user_id="u2", session_id="s2")
        assert other_user.state == {"app:k1": "v1", "app:k2": "v2"}
        again = await service.get_session(app_name=app, user_id="u1", session_id="s1")
        assert again.state == {"sk": 1, "app:k1": "v1", "app:k2": "v2", "user:k1": "u", "user:k2": 2}
        assert await service.get_user_state(app_name=app, user_id="u1") == {"k1": "u", "k2": 2}
        assert await service.get_user_state(app_name=app, user_id="u2") == {}
        assert await service.get_user_state(app_name=f"{app}-other", user_id="u1") == {}

    run_with(database_url, body)


def test_temp_state_lives_only_in_the_callers_session_object(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u", state={"temp:init": 1})
        assert session.state == {}
        event = Event(author="agent1", actions=delta(**{"temp:out": "a1", "sk": "v"}))
        returned = await service.append_event(session, event)
        assert returned is event and event.actions.state_delta == {"sk": "v"}
        assert session.state == {"temp:out": "a1", "sk": "v"}
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert got.state == {"sk": "v"}
        assert got.events[0].actions.state_delta == {"sk": "v"}

    run_with(database_url, body)


def test_state_values_keep_their_types_and_updates_are_shallow(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(
            app_name=app, user_id="u", state={"d": {"a": 1, "b": 2}, "gone": 1, "user:p": {"x": 1}}
        )
        values = {"d": {"c": 3}, "gone": None, "t": True, "f": 0.1 + 0.2, "big": 2**62, "user:p": {"y": 2}}
        await service.append_event(session, Event(author="user", actions=delta(**values)))
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert got.state == values
        assert got.state["t"] is True and "gone" in got.state

    run_with(database_url, body)


# --- events ----------------------------------------------------------------------------------


def test_every_event_field_round_trips(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        event = Event(
            invocation_id="invocation",
            author="user",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(text="look"),
                    types.Part.from_bytes(data=b"\x00png", mime_type="image/png"),
                ],
            ),
            turn_complete=True,
            partial=False,
            actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
            long_running_tool_ids={"tool2", "tool1"},
            error_code="error_code",
            error_message="error_message",
            interrupted=True,
            grounding_metadata=types.GroundingMetadata(
                web_search_queries=["q"], search_entry_point=types.SearchEntryPoint(sdk_blob=b"blob")
            ),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=1, candidates_token_count=1, total_token_count=2
            ),
            citation_metadata=types.CitationMetadata(),
            custom_metadata={"custom_key": "custom_value"},
            timestamp=1700000000.123,
            branch="root.sub",
            input_transcription=types.Transcription(text="in", finished=True),
            output_transcription=types.Transcription(text="out", finished=True),
        )
        await service.append_event(session, event)
        assert session.last_update_time == 1700000000.123
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert got == session
        assert got.events[0] == event

    run_with(database_url, body)


def test_partial_events_are_not_stored(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        event = Event(author="user", partial=True, actions=delta(k=1))
        assert await service.append_event(session, event) is event
        assert session.events == [] and session.state == {}
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert got.events == [] and got.state == {}

    run_with(database_url, body)


def test_last_update_time_follows_the_appended_event(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        created = session.last_update_time
        await service.append_event(session, Event(author="user", timestamp=created + 10))
        assert session.last_update_time == created + 10
        got = await service.get_session(
            app_name=app, user_id="u", session_id=session.id, config=GetSessionConfig(num_recent_events=0)
        )
        assert got.last_update_time == created + 10 and got.events == []

    run_with(database_url, body)


def test_get_session_config(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        for i in range(1, 6):
            await service.append_event(session, Event(author="user", timestamp=i))

        async def stamps(**config: Any) -> list[float]:
            got = await service.get_session(
                app_name=app, user_id="u", session_id=session.id, config=GetSessionConfig(**config)
            )
            return [e.timestamp for e in got.events]

        assert await stamps() == [1, 2, 3, 4, 5]
        assert await stamps(num_recent_events=0) == []
        assert await stamps(num_recent_events=3) == [3, 4, 5]
        assert await stamps(after_timestamp=4.0) == [4, 5]  # inclusive
        assert await stamps(after_timestamp=50) == []
        assert await stamps(after_timestamp=4.0, num_recent_events=3) == [4, 5]
        with pytest.raises(ValueError):
            GetSessionConfig(num_recent_events=-1)

    run_with(database_url, body)


def test_tied_timestamps_keep_append_order(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        ids = ["c", "a", "b"]
        for event_id in ids:
            await service.append_event(session, Event(id=event_id, author="user", timestamp=100.0))
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert [e.id for e in got.events] == ids

    run_with(database_url, body)


def test_timestamps_are_exact_across_a_dst_change(database_url):
    """01:30 happens twice in New York on 2026-11-01: both instants come back exactly, in order."""

    async def body(service: LedgerSessionService, app: str) -> None:
        zone = ZoneInfo("America/New_York")
        first = datetime(2026, 11, 1, 1, 30, 0, 123457, tzinfo=zone, fold=0).timestamp() + 1e-7
        second = datetime(2026, 11, 1, 1, 30, 0, 123457, tzinfo=zone, fold=1).timestamp()
        assert second - first > 3599
        session = await service.create_session(app_name=app, user_id="u")
        for stamp in (first, second):
            await service.append_event(session, Event(author="user", timestamp=stamp))
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert [e.timestamp for e in got.events] == [first, second]
        later = await service.get_session(
            app_name=app, user_id="u", session_id=session.id, config=GetSessionConfig(after_timestamp=second)
        )
        assert [e.timestamp for e in later.events] == [second]

    run_with(database_url, body)


def test_event_ids_are_idempotent(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        event = text_event("once", actions=delta(n=1))
        await service.append_event(session, event)
        await service.append_event(session, event.model_copy(deep=True))  # a redelivery
        assert len(session.events) == 1
        with pytest.raises(ValueError, match="already used"):
            await service.append_event(session, text_event("other", id=event.id))
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert [e.id for e in got.events] == [event.id] and got.state == {"n": 1}

    run_with(database_url, body)


def test_unknown_and_deleted_sessions_refuse_appends(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        ghost = Session(id="ghost", app_name=app, user_id="u")
        with pytest.raises(SessionNotFoundError):
            await service.append_event(ghost, Event(author="user"))
        session = await service.create_session(app_name=app, user_id="u")
        await service.append_event(session, Event(author="user"))
        await service.delete_session(app_name=app, user_id="u", session_id=session.id)
        with pytest.raises(SessionNotFoundError):
            await service.append_event(session, Event(author="user"))

    run_with(database_url, body)


# --- staleness -------------------------------------------------------------------------------


def test_a_stale_copy_cannot_append(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        original = await service.create_session(app_name=app, user_id="u")
        await service.append_event(original, Event(invocation_id="inv1", author="user", actions=delta(sk1=1)))
        fresh = await service.get_session(app_name=app, user_id="u", session_id=original.id)
        await service.append_event(fresh, Event(invocation_id="inv2", author="user", actions=delta(sk2=2)))
        with pytest.raises(StaleSessionError, match="modified in storage"):
            await service.append_event(
                original, Event(invocation_id="inv3", author="user", actions=delta(sk3=3))
            )
        final = await service.get_session(app_name=app, user_id="u", session_id=original.id)
        assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
        assert final.state == {"sk1": 1, "sk2": 2}
        await service.append_event(fresh, Event(invocation_id="inv4", author="user"))  # still current

    run_with(database_url, body)


def test_two_copies_racing_one_is_rejected(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        for i in range(5):
            latest = await service.get_session(app_name=app, user_id="u", session_id=session.id)
            copies = [latest.model_copy(deep=True), latest.model_copy(deep=True)]
            results = await asyncio.gather(
                *(
                    service.append_event(copy, Event(invocation_id=f"inv{i}-{n}", author="user"))
                    for n, copy in enumerate(copies)
                ),
                return_exceptions=True,
            )
            assert sorted(type(r).__name__ for r in results) == ["Event", "StaleSessionError"]
        final = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert len(final.events) == 5

    run_with(database_url, body)


def test_hand_built_and_drifted_sessions_that_are_current_can_append(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        await service.append_event(session, Event(invocation_id="inv1", author="user"))
        session.last_update_time -= 0.0001
        session._storage_update_marker = None
        await service.append_event(session, Event(invocation_id="inv2", author="user"))
        stale = Session(id=session.id, app_name=app, user_id="u")  # knows none of the events
        with pytest.raises(StaleSessionError):
            await service.append_event(stale, Event(invocation_id="inv3", author="user"))
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert [e.invocation_id for e in got.events] == ["inv1", "inv2"]

    run_with(database_url, body)


def test_one_session_object_shared_by_concurrent_tasks_loses_nothing(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")

        async def writer(name: str) -> None:
            for i in range(15):
                await service.append_event(session, text_event(f"{name}{i}", actions=delta(**{name: i})))

        await asyncio.gather(writer("a"), writer("b"))
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        texts = [e.content.parts[0].text for e in got.events]
        assert sorted(texts) == sorted(f"{n}{i}" for n in "ab" for i in range(15))
        assert [t for t in texts if t[0] == "a"] == [f"a{i}" for i in range(15)]
        assert got.state == {"a": 14, "b": 14}
        assert got.events == session.events

    run_with(database_url, body)


# --- the ledger underneath -------------------------------------------------------------------


def test_a_workers_compaction_reads_as_an_adk_compaction_and_stales_nothing(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        for i in range(6):
            await service.append_event(
                session, text_event(f"q{i}", invocation_id=f"inv{i}", timestamp=10.0 + i)
            )
            await service.append_event(
                session, text_event(f"a{i}", author="bot", invocation_id=f"inv{i}", timestamp=10.5 + i)
            )
        key = service.ledger_id(app, "u", session.id)
        result = await service.service.compact(key, EventCountTrigger(1), SlidingWindowStrategy(max_events=4))
        assert result.archived
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert [e.content.parts[0].text for e in got.events] == ["q4", "a4", "q5", "a5"]
        # the session object read before the compaction is not stale: nothing it wrote was missed
        await service.append_event(session, text_event("q6", invocation_id="inv6", timestamp=20.0))
        kinds = [r.kind for r in await service.service.records(key)]
        assert kinds.count(Kind.EVENT) == 13 and Kind.COMPACTION in kinds

    run_with(database_url, body)


class TheyTalked:
    """A summarizer whose summary is always the same."""

    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "they talked"


def test_a_summarizing_compaction_stales_nothing_and_another_writer_still_does(database_url):
    """The summary events a compaction writes are its own (the window positions after its read
    head), not another writer's: the object read before it appends on; an event someone else
    appended, before the compaction or after it, still makes the object stale."""

    async def body(service: LedgerSessionService, app: str) -> None:
        strategy = RecursiveSummarizationStrategy(TheyTalked(), max_events_to_keep=2, overlap_size=1)
        session = await service.create_session(app_name=app, user_id="u")
        for i in range(4):
            await service.append_event(
                session, text_event(f"q{i}", invocation_id=f"inv{i}", timestamp=10.0 + i)
            )
        key = service.ledger_id(app, "u", session.id)
        assert (await service.service.compact(key, EventCountTrigger(1), strategy)).archived
        await service.append_event(session, text_event("q4", invocation_id="inv4", timestamp=20.0))
        other = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        await service.append_event(other, text_event("theirs", invocation_id="inv5", timestamp=21.0))
        again = RecursiveSummarizationStrategy(TheyTalked(), max_events_to_keep=1, overlap_size=0)
        assert (await service.service.compact(key, TurnCountTrigger(1), again)).archived
        with pytest.raises(StaleSessionError):
            await service.append_event(session, text_event("mine", invocation_id="inv6", timestamp=22.0))

    run_with(database_url, body)


def test_a_summary_reads_as_an_adk_compaction_event(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u")
        for i in range(4):
            await service.append_event(
                session, text_event(f"q{i}", invocation_id=f"inv{i}", timestamp=10.0 + i)
            )
        key = service.ledger_id(app, "u", session.id)
        strategy = RecursiveSummarizationStrategy(TheyTalked(), max_events_to_keep=2, overlap_size=1)
        await service.service.compact(key, EventCountTrigger(1), strategy)
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        summary, *kept = got.events
        compaction = summary.actions.compaction
        assert compaction.compacted_content.parts[0].text == "they talked"
        assert compaction.compacted_content.role == "model"
        assert compaction.end_timestamp < kept[0].timestamp  # hides none of the kept events
        assert [e.content.parts[0].text for e in kept] == ["q2", "q3"]

    run_with(database_url, body)


def test_a_rewind_event_is_the_ledgers_rewind(database_url):
    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u", state={"tenant": "t1"})
        await service.append_event(session, text_event("one", invocation_id="inv1", actions=delta(a=1)))
        await service.append_event(
            session, text_event("two", invocation_id="inv2", actions=delta(a=2, b=1, **{"user:u": 1}))
        )
        rewind = Event(
            invocation_id="rw",
            author="user",
            actions=EventActions(rewind_before_invocation_id="inv2", state_delta={"a": 1, "b": None}),
        )
        await service.append_event(session, rewind)
        got = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert [e.invocation_id for e in got.events] == ["inv1", "rw"]
        assert got.state == {"tenant": "t1", "a": 1, "b": None, "user:u": 1}  # initial state kept
        assert session.state == got.state
        key = service.ledger_id(app, "u", session.id)
        kinds = [r.kind for r in await service.service.records(key)]
        assert kinds == [Kind.CREATED, Kind.EVENT, Kind.EVENT, Kind.REWIND, Kind.EVENT]
        await service.append_event(session, text_event("three", invocation_id="inv3"))  # not stale

    run_with(database_url, body)


def test_copies_in_two_services_on_one_ledger_race_and_one_is_refused(database_url):
    """Two processes' services (here two services on one durable ledger): the check is the
    ledger's conditional append, not a lock in one process."""
    if database_url == "memory://":
        pytest.skip("one memory ledger per service")

    async def main() -> None:
        app = f"app-{uuid.uuid4().hex[:8]}"
        async with LedgerSessionService(database_url) as first, LedgerSessionService(database_url) as second:
            session = await first.create_session(app_name=app, user_id="u")
            await first.append_event(session, Event(invocation_id="warm", author="user"))
            for i in range(4):
                mine = await first.get_session(app_name=app, user_id="u", session_id=session.id)
                theirs = await second.get_session(app_name=app, user_id="u", session_id=session.id)
                results = await asyncio.gather(
                    first.append_event(mine, Event(invocation_id=f"a{i}", author="user")),
                    second.append_event(theirs, Event(invocation_id=f"b{i}", author="user")),
                    return_exceptions=True,
                )
                assert sorted(type(r).__name__ for r in results) == ["Event", "StaleSessionError"]
            final = await second.get_session(app_name=app, user_id="u", session_id=session.id)
            assert len(final.events) == 5

    asyncio.run(main())


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: text_event("half a pair \ud800"), "cannot be stored: .*surrogates not allowed"),
        (
            lambda: Event(author="user", actions=delta(k="\udfff")),
            "cannot be stored: .*surrogates not allowed",
        ),
        (lambda: text_event("ok", author="agent\ud800"), "cannot be stored: .*surrogates not allowed"),
        (lambda: text_event("ok", timestamp=1e20), "timestamp 1e\\+20, which is no time"),
        (lambda: text_event("ok", timestamp=float("nan")), "timestamp nan, which is no time"),
    ],
)
def test_an_event_the_ledger_cannot_keep_is_a_value_error_and_nothing_is_stored(database_url, make, problem):
    """Issue 25: a lone surrogate was pydantic's `PydanticSerializationError`, a timestamp beyond
    the calendar an `OverflowError`."""

    async def body(service: LedgerSessionService, app: str) -> None:
        session = await service.create_session(app_name=app, user_id="u", state={"kept": 1})
        await service.append_event(session, text_event("before"))
        with pytest.raises(ValueError, match=problem):
            await service.append_event(session, make())
        again = await service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert again is not None and again.state == {"kept": 1}
        assert [e.content.parts[0].text for e in again.events] == ["before"]
        assert len(session.events) == 1  # the caller's copy is unchanged too

    run_with(database_url, body)
