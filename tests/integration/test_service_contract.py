"""The service contract (docs/api.md "SessionService"), one suite run on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from sessionledger.domain import (
    AssistantMessage,
    EventFilter,
    MessageType,
    SessionEvent,
    SessionNotFound,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.domain.chain import chain_problems
from sessionledger.domain.compaction import (
    CompactionResult,
    EventCountTrigger,
    SlidingWindowStrategy,
    TurnCountTrigger,
)
from sessionledger.infrastructure import SessionService, open_service

from tests.conftest import SQL_BACKENDS, sql_url
from tests.fakes.compaction import Always, SummarizeAllButTwo

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def texts(events) -> list[str | None]:
    return [e.message.text for e in events]


def event(session_id: str, text: str, *, at: datetime | None = None, **fields) -> SessionEvent:
    return SessionEvent(session_id=session_id, message=UserMessage(text), timestamp=at or T0, **fields)


class Never:
    def should_compact(self, request) -> bool:
        return False


# --- sessions ---------------------------------------------------------------------------------


def test_create_and_get_session(service: SessionService) -> None:
    user = unique("u")
    s = service.create_session(user, app_name="chat", metadata={"topic": "x"}, state={"k": [1, 2]})
    uuid.UUID(s.id)
    got = service.get_session(s.id)
    assert got is not None
    assert (got.id, got.user_id, got.app_name) == (s.id, user, "chat")
    assert got.metadata == {"topic": "x"}
    assert got.state == {"k": [1, 2]}
    assert got.created_at.tzinfo is not None
    assert got.expires_at is None  # no ttl given, none set by the operator: never expires


def test_session_id_ttl_and_never_expiring(service: SessionService) -> None:
    sid = unique("s")
    s = service.create_session(unique("u"), session_id=sid, ttl=None)
    assert s.id == sid and s.expires_at is None
    short = service.create_session(unique("u"), ttl=timedelta(hours=1))
    assert short.expires_at == short.created_at + timedelta(hours=1)


def test_existing_id_is_a_value_error(service: SessionService) -> None:
    sid = unique("s")
    service.create_session(unique("u"), session_id=sid)
    with pytest.raises(ValueError):
        service.create_session(unique("u"), session_id=sid)


def test_ownership(service: SessionService) -> None:
    owner = unique("u")
    s = service.create_session(owner)
    assert service.get_session(s.id, user_id=owner) is not None
    assert service.get_session(s.id, user_id=unique("other")) is None
    assert service.get_session(unique("missing")) is None


def test_a_user_never_reads_or_writes_another_users_session(service: SessionService) -> None:
    owner, intruder = unique("u"), unique("intruder")
    s = service.create_session(owner)
    service.append_message(s.id, UserMessage("my secret"), user_id=owner)
    before = (service.event_version(s.id), service.get_events(s.id))

    assert service.get_events(s.id, user_id=intruder) == []
    assert service.get_events(s.id, EventFilter.keyword_search("secret"), user_id=intruder) == []
    assert service.get_messages(s.id, user_id=intruder) == []
    with pytest.raises(ValueError, match="does not belong to user"):
        service.append_message(s.id, UserMessage("injected"), user_id=intruder)
    with pytest.raises(ValueError, match="does not belong to user"):
        service.append_event(SessionEvent(session_id=s.id, message=UserMessage("x")), user_id=intruder)
    with pytest.raises(ValueError, match="does not belong to user"):
        service.delete_session(s.id, user_id=intruder)
    with pytest.raises(SessionNotFound):
        service.append_message(unique("missing"), UserMessage("x"), user_id=owner)

    assert (service.event_version(s.id), service.get_events(s.id)) == before
    assert [m.text for m in service.get_messages(s.id, user_id=owner)] == ["my secret"]
    service.delete_session(s.id, user_id=owner)
    assert service.get_session(s.id) is None


def test_list_sessions_oldest_first_and_by_app(service: SessionService) -> None:
    user = unique("u")
    with freeze_time(T0) as clock:
        first = service.create_session(user, app_name="a")
        clock.tick(timedelta(seconds=1))
        second = service.create_session(user, app_name="b")
        third = service.create_session(user, app_name="a")  # same instant as second: creation order
    service.create_session(unique("someone-else"), app_name="a")
    assert [s.id for s in service.list_sessions(user)] == [first.id, second.id, third.id]
    assert [s.id for s in service.list_sessions(user, app_name="a")] == [first.id, third.id]
    assert service.list_sessions(unique("nobody")) == []


def test_recent_sessions_every_users_newest_first_a_page_at_a_time(service: SessionService) -> None:
    app = unique("app")  # the PostgreSQL ledger is shared with other tests: only this app's sessions
    with freeze_time(T0) as clock:
        made = [service.create_session(unique("u"), app_name=app)]
        clock.tick(timedelta(seconds=1))
        made += [service.create_session(unique("u"), app_name=app) for _ in range(4)]  # one instant
    service.create_session(made[0].user_id, app_name=unique("other-app"))
    gone = service.create_session(unique("u"), app_name=app)
    service.delete_session(gone.id)
    newest_first = [s.id for s in reversed(made)]
    listed = service.recent_sessions(app_name=app, limit=10)
    assert [s.id for s in listed] == newest_first
    assert {s.user_id for s in listed} == {s.user_id for s in made}, "every user's, each with its owner"
    pages = [service.recent_sessions(app_name=app, limit=2, offset=offset) for offset in (0, 2, 4, 6)]
    assert [[s.id for s in page] for page in pages] == [
        newest_first[:2],
        newest_first[2:4],
        newest_first[4:],
        [],
    ]
    assert made[1].id in {s.id for s in service.recent_sessions(limit=1_000_000)}
    for bad in (
        {"limit": 0},
        {"limit": -1},
        {"offset": -1},
        {"limit": 1.5},
        {"limit": 2**63},
        {"offset": 2**63},
    ):
        with pytest.raises(ValueError, match=r"^(limit|offset) must be"):
            service.recent_sessions(app_name=app, **bad)


def test_expiry_with_a_frozen_clock(service: SessionService) -> None:
    user = unique("u")
    with freeze_time(T0) as clock:
        soon = service.create_session(user, ttl=timedelta(minutes=5))
        later = service.create_session(user, ttl=timedelta(days=1))
        never = service.create_session(user, ttl=None)
        default = service.create_session(user)
        clock.tick(timedelta(minutes=10))
        assert service.get_session(soon.id) is not None  # expired sessions stay readable
        service.delete_expired_sessions(T0 + timedelta(minutes=5))  # strict <: not `soon`
        assert service.get_session(soon.id) is not None
        assert service.delete_expired_sessions() >= 1
    assert service.get_session(soon.id) is None
    assert service.get_session(later.id) is not None
    assert service.get_session(never.id) is not None
    assert service.get_session(default.id) is not None


def test_the_operators_session_ttl_is_the_default_and_a_session_ttl_or_none_overrides_it(
    database_url: str,
) -> None:
    user = unique("u")
    with open_service(database_url, session_ttl=timedelta(hours=1)) as service, freeze_time(T0) as clock:
        default = service.create_session(user)
        longer = service.create_session(user, ttl=timedelta(days=2))
        never = service.create_session(user, ttl=None)
        assert (default.expires_at, longer.expires_at, never.expires_at) == (
            T0 + timedelta(hours=1),
            T0 + timedelta(days=2),
            None,
        )
        clock.tick(timedelta(hours=2))
        service.delete_expired_sessions()
        assert service.get_session(default.id) is None
        assert service.get_session(longer.id) is not None and service.get_session(never.id) is not None
    with pytest.raises(ValueError, match="session_ttl must be positive"):
        open_service(database_url, session_ttl=timedelta(0))


def test_delete_session(service: SessionService) -> None:
    user, app = unique("u"), unique("app")
    s = service.create_session(user, app_name=app, state={"app:shared": 1, "user:pref": "x", "own": 2})
    service.append_message(s.id, UserMessage("secret"), state_delta={"app:more": True})
    service.delete_session(s.id)
    assert service.get_session(s.id) is None
    assert service.get_events(s.id) == []
    assert service.get_messages(s.id) == []
    assert service.event_version(s.id) == 0
    assert service.list_sessions(user) == []
    with pytest.raises(SessionNotFound):
        service.append_message(s.id, UserMessage("again"))
    with pytest.raises(ValueError):
        service.create_session(user, session_id=s.id, app_name=app)
    other = service.create_session(user, app_name=app)
    assert other.state == {"app:shared": 1, "app:more": True, "user:pref": "x"}
    service.delete_session(s.id)  # again: a no-op
    service.delete_session(unique("missing"))
    records = service.records(s.id)
    assert records[-1].kind == "erasure"
    assert all(r.payload is None for r in records if r.kind in ("created", "event"))
    assert chain_problems(records) == []


# --- appends and versions ---------------------------------------------------------------------


def test_append_and_version(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    assert service.event_version(s.id) == 0
    e = event(s.id, "hi")
    assert service.append_event(e) is True
    assert service.event_version(s.id) == 1
    assert service.append_event(e) is False  # same id: nothing changes
    assert service.append_event(event(s.id, "other text", id=e.id)) is False
    assert service.event_version(s.id) == 1
    assert texts(service.get_events(s.id)) == ["hi"]
    stored = service.append_message(s.id, AssistantMessage("hello"), metadata={"m": 1}, branch="a.b")
    assert service.event_version(s.id) == 2
    assert (stored.metadata, stored.branch) == ({"m": 1}, "a.b")
    assert service.event_version(unique("missing")) == 0


def test_event_ids_are_per_session(service: SessionService) -> None:
    a, b = service.create_session(unique("u")), service.create_session(unique("u"))
    shared = unique("e")
    assert service.append_event(event(a.id, "x", id=shared))
    assert service.append_event(event(b.id, "y", id=shared))


def test_round_trip_of_every_field(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    at = datetime(2024, 5, 1, 12, 30, 45, 123456, tzinfo=UTC)
    original = [
        SessionEvent(
            session_id=s.id,
            message=UserMessage("q", metadata={"lang": "en"}),
            timestamp=at,
            metadata={"synthetic": False, "n": 2**63 - 1, "f": 0.1 + 0.2, "big": 1e20},
            branch="root.child",
            invocation_id="inv-1",
            state_delta={"k": None},
        ),
        SessionEvent(
            session_id=s.id,
            message=AssistantMessage(tool_calls=[ToolCall("c1", "lookup", '{"q": "x"}')]),
            timestamp=at,
        ),
        SessionEvent(
            session_id=s.id,
            message=ToolResponseMessage([ToolResponse("c1", "lookup", "42")]),
            timestamp=at,
        ),
        SessionEvent(session_id=s.id, message=SystemMessage("sys ü ✓"), timestamp=at),
    ]
    for e in original:
        service.append_event(e)
    back = service.get_events(s.id)
    assert [b.id for b in back] == [e.id for e in original]
    for b, e in zip(back, original, strict=True):
        assert (b.message, b.timestamp, b.branch, b.invocation_id) == (
            e.message,
            e.timestamp,
            e.branch,
            e.invocation_id,
        )
        assert b.metadata == e.metadata and b.state_delta == e.state_delta and not b.archived
    assert isinstance(back[0].metadata["big"], float) and back[0].metadata["n"] == 2**63 - 1
    assert type(back[0].metadata["n"]) is int  # a float would equal it only approximately


def test_events_come_back_in_insertion_order(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    for i, minutes in enumerate([30, 10, 20, 0]):
        service.append_event(event(s.id, f"e{i}", at=T0 + timedelta(minutes=minutes)))
    assert texts(service.get_events(s.id)) == ["e0", "e1", "e2", "e3"]
    assert [m.text for m in service.get_messages(s.id)] == ["e0", "e1", "e2", "e3"]


def test_unknown_session(service: SessionService) -> None:
    missing = unique("missing")
    assert service.get_events(missing) == []
    assert service.get_messages(missing) == []
    with pytest.raises(SessionNotFound):
        service.append_event(event(missing, "x"))
    with pytest.raises(SessionNotFound):
        service.append_message(missing, UserMessage("x"))
    with pytest.raises(SessionNotFound):
        service.compact(missing, Always(), SlidingWindowStrategy(max_events=1))


# --- filters ------------------------------------------------------------------------------------


@pytest.fixture
def history(service: SessionService) -> str:
    """A session with varied events: types, branches, times, synthetic ones and odd characters."""
    s = service.create_session(unique("u"))
    rows = [
        ("user", "Hello world", None, 0, {}),
        ("assistant", "100% sure", None, 1, {}),
        ("user", "snake_case name", "orch", 2, {}),
        ("assistant", "plain 100 percent", "orch.researcher", 3, {}),
        ("user", "sibling branch", "orch.writer", 4, {}),
        ("assistant", "summary so far", None, 5, {"synthetic": True}),
        ("user", "HELLO again", None, 6, {}),
        ("tool", None, None, 7, {}),
        ("user", "back\\slash", "orchestra", 8, {}),
    ]
    for kind, text, branch, minute, metadata in rows:
        if kind == "user":
            message = UserMessage(text)
        elif kind == "assistant":
            message = AssistantMessage(text)
        else:
            message = ToolResponseMessage([ToolResponse("c", "f", "r")])
        service.append_event(
            SessionEvent(
                session_id=s.id,
                message=message,
                timestamp=T0 + timedelta(minutes=minute),
                branch=branch,
                metadata=metadata,
            )
        )
    return s.id


def test_keyword_is_literal_and_case_insensitive(service: SessionService, history: str) -> None:
    assert texts(service.get_events(history, EventFilter(keyword="hello"))) == ["Hello world", "HELLO again"]
    assert texts(service.get_events(history, EventFilter(keyword="%"))) == ["100% sure"]
    assert texts(service.get_events(history, EventFilter(keyword="0%"))) == ["100% sure"]
    assert texts(service.get_events(history, EventFilter(keyword="_"))) == ["snake_case name"]
    assert texts(service.get_events(history, EventFilter(keyword="e_c"))) == ["snake_case name"]
    assert texts(service.get_events(history, EventFilter(keyword="\\"))) == ["back\\slash"]
    assert service.get_events(history, EventFilter(keyword="100_")) == []


def test_keywords_any_and_all(service: SessionService, history: str) -> None:
    any_ = EventFilter(keywords=["hello", "sure"])
    assert texts(service.get_events(history, any_)) == ["Hello world", "100% sure", "HELLO again"]
    all_ = EventFilter(keywords=["hello", "again"], match_mode="all")
    assert texts(service.get_events(history, all_)) == ["HELLO again"]


def test_pattern(service: SessionService, history: str) -> None:
    assert texts(service.get_events(history, EventFilter(pattern=r"^[A-Z]+ "))) == ["HELLO again"]
    insensitive = EventFilter(pattern=re.compile("hello", re.IGNORECASE), last_n=1)
    assert texts(service.get_events(history, insensitive)) == ["HELLO again"]
    paged = EventFilter.pattern_search(r"\w").merge(EventFilter(page=1, page_size=3))
    assert len(service.get_events(history, paged)) == 3


def test_branch_isolation(service: SessionService, history: str) -> None:
    visible = texts(service.get_events(history, EventFilter.for_branch("orch.researcher")))
    assert visible == ["Hello world", "100% sure", "snake_case name", "plain 100 percent", "summary so far",
                       "HELLO again", ""]  # fmt: skip
    assert "sibling branch" not in texts(service.get_events(history, EventFilter.for_branch("orch")))
    assert "back\\slash" not in texts(service.get_events(history, EventFilter.for_branch("orch")))


def test_types_times_synthetic(service: SessionService, history: str) -> None:
    tools = service.get_events(history, EventFilter(message_types=[MessageType.TOOL]))
    assert [e.type for e in tools] == [MessageType.TOOL]
    window = EventFilter(start=T0 + timedelta(minutes=1), end=T0 + timedelta(minutes=3))
    assert texts(service.get_events(history, window)) == ["100% sure", "snake_case name", "plain 100 percent"]
    real = texts(service.get_events(history, EventFilter.real_only()))
    assert "summary so far" not in real and len(real) == 8


def test_last_n_and_paging(service: SessionService, history: str) -> None:
    assert texts(service.get_events(history, EventFilter.last(2))) == ["", "back\\slash"]
    assert len(service.get_events(history, EventFilter.last(100))) == 9
    page1 = EventFilter(page=1, page_size=4)
    assert texts(service.get_events(history, page1)) == [
        "sibling branch", "summary so far", "HELLO again", "",
    ]  # fmt: skip
    assert service.get_events(history, EventFilter(page=5, page_size=4)) == []
    users = EventFilter(message_types=[MessageType.USER], last_n=2)
    assert texts(service.get_events(history, users)) == ["HELLO again", "back\\slash"]
    search = EventFilter.keyword_search("e", page=0, page_size=2)
    assert texts(service.get_events(history, search)) == ["Hello world", "100% sure"]


# --- state ----------------------------------------------------------------------------------------


def test_state_scopes(service: SessionService) -> None:
    user, app = unique("u"), unique("app")
    a = service.create_session(user, app_name=app, state={"own": 1, "temp:t": "x", "app:a": 1})
    b = service.create_session(user, app_name=app)
    stranger = service.create_session(unique("u2"), app_name=app)
    elsewhere = service.create_session(user, app_name=unique("app"))
    stored = service.append_message(
        a.id,
        UserMessage("hi"),
        state_delta={"own": {"x": 1}, "gone": None, "temp:scratch": 1, "user:lang": "fr", "app:a": 2},
    )
    assert dict(stored.state_delta) == {"own": {"x": 1}, "gone": None, "user:lang": "fr", "app:a": 2}
    assert dict(service.get_events(a.id)[0].state_delta) == dict(stored.state_delta)
    assert service.get_session(a.id).state == {"own": {"x": 1}, "gone": None, "user:lang": "fr", "app:a": 2}
    assert service.get_session(b.id).state == {"user:lang": "fr", "app:a": 2}
    assert service.get_session(stranger.id).state == {"app:a": 2}
    assert service.get_session(elsewhere.id).state == {}
    service.append_message(a.id, UserMessage("again"), state_delta={"own": {"y": 2}})
    assert service.get_session(a.id).state["own"] == {"y": 2}  # shallow: replaced, not merged
    assert all("temp:" not in key for r in service.records(a.id) if r.payload for key in str(r.payload))


# --- compaction -----------------------------------------------------------------------------------


def conversation(service: SessionService, session_id: str, turns: int) -> None:
    for i in range(turns):
        service.append_message(session_id, UserMessage(f"question {i}"))
        service.append_message(session_id, AssistantMessage(f"answer {i}"))


def test_compaction_writes_back(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    conversation(service, s.id, 4)
    before = service.event_version(s.id)
    result = service.compact(s.id, TurnCountTrigger(2), SlidingWindowStrategy(max_events=4))
    assert result.events_removed == 4
    assert service.event_version(s.id) == before + 1
    assert [m.text for m in service.get_messages(s.id)] == texts(result.compacted)
    everything = service.get_events(s.id)
    assert texts(everything) == [f"{kind} {i}" for i in range(4) for kind in ("question", "answer")]
    assert [e.archived for e in everything] == [True] * 4 + [False] * 4
    found = service.get_events(s.id, EventFilter(keyword="question 0"))
    assert len(found) == 1 and found[0].archived
    assert service.get_events(s.id, EventFilter(keyword="question 0", exclude_archived=True)) == []
    service.append_message(s.id, UserMessage("later"))
    assert [m.text for m in service.get_messages(s.id)] == [*texts(result.compacted), "later"]
    assert service.get_events(s.id, EventFilter.last(1))[0].message.text == "later"
    assert texts(service.replay(s.id).window) == [m.text for m in service.get_messages(s.id)]


def test_superseded_summary_is_archived(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    conversation(service, s.id, 3)
    first = service.compact(s.id, Always(), SummarizeAllButTwo(tokens_saved=7))
    summary = first.compacted[0]
    assert [m.text for m in service.get_messages(s.id)] == ["summary of 4", "question 2", "answer 2"]
    conversation(service, s.id, 1)
    version = service.event_version(s.id)
    second = service.compact(s.id, Always(), SummarizeAllButTwo(tokens_saved=7))
    assert service.event_version(s.id) == version + 1
    assert [m.text for m in service.get_messages(s.id)] == texts(second.compacted)
    old = [e for e in service.get_events(s.id) if e.id == summary.id]
    assert len(old) == 1 and old[0].archived  # neither kept nor listed: archived, never lost
    assert len(service.get_events(s.id)) == 8 + 2  # 8 real events and two summaries
    projection = service.replay(s.id)
    assert [e.id for e in projection.window] == [e.id for e in service.get_events(s.id, EventFilter.active())]
    assert [e.id for e in projection.archived] == [e.id for e in service.get_events(s.id) if e.archived]
    assert chain_problems(service.records(s.id)) == []


def test_compaction_no_ops(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    conversation(service, s.id, 2)
    version = service.event_version(s.id)
    result = service.compact(s.id, Never(), SummarizeAllButTwo(tokens_saved=7))
    assert result.archived == () and texts(result.compacted) == texts(service.get_events(s.id))
    result = service.compact(s.id, Always(), SlidingWindowStrategy(max_events=100))
    assert result.archived == ()
    assert service.event_version(s.id) == version
    with pytest.raises(ValueError):
        service.compact(s.id, None, SummarizeAllButTwo(tokens_saved=7))


def test_an_event_count_trigger_takes_no_kept_event_for_a_new_one(service: SessionService) -> None:
    """The events a summary kept are older than it: the trigger (deciding on the service's window
    stats) waits for `interval` events appended after the compaction, as the contract says."""
    s = service.create_session(unique("u"))
    conversation(service, s.id, 3)
    service.compact(s.id, Always(), SummarizeAllButTwo())
    assert service.compact(s.id, EventCountTrigger(2), SlidingWindowStrategy(max_events=1)).archived == ()
    service.append_message(s.id, UserMessage("new question"))
    assert service.compact(s.id, EventCountTrigger(2), SlidingWindowStrategy(max_events=1)).archived == ()
    service.append_message(s.id, AssistantMessage("new answer"))
    result = service.compact(s.id, EventCountTrigger(2), SlidingWindowStrategy(max_events=1))
    assert texts(result.archived) == ["question 2", "answer 2", "new question", "new answer"]


KEYWORD_TEXTS = ["İstanbul", "ist", "ΟΔΟΣ", "ΟΔΟΣ ΚΑΙ", "οδος και", "Straße"]


@pytest.mark.parametrize(
    "keyword", ["İstanbul", "ist", "i̇st", "ΟΔΟΣ", "οδος", "οδοσ", "δος κ", "STRASSE", "straße"]
)
def test_a_keyword_search_lowercases_as_python_does_on_every_backend(
    service: SessionService, keyword: str
) -> None:
    """`keyword in text.lower()`, whatever the database's own lowercasing (PostgreSQL and MariaDB
    write `i` for `İ` and `σ` for a final `Σ`), paged or not."""
    s = service.create_session(unique("u"))
    for text in KEYWORD_TEXTS:
        service.append_message(s.id, UserMessage(text))
    expected = [text for text in KEYWORD_TEXTS if keyword.lower() in text.lower()]
    assert texts(service.get_events(s.id, EventFilter(keyword=keyword))) == expected
    assert texts(service.get_events(s.id, EventFilter.keyword_search(keyword, 0, 1))) == expected[:1]
    assert texts(service.get_events(s.id, EventFilter(keywords=(keyword, "absent")))) == expected


def test_window_stats_follow_writes(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    conversation(service, s.id, 3)
    stats = service.window_stats(s.id)
    assert (stats.events, stats.turns, stats.uncounted, stats.tokens) == (6, 3, 6, 0)
    assert stats.bytes == sum(len(f"User: question {i}") + len(f"Assistant: answer {i}") for i in range(3))
    assert service.fill_token_counts(s.id, len) == 6
    assert service.fill_token_counts(s.id, len) == 0
    stats = service.window_stats(s.id)
    assert (stats.tokens, stats.uncounted) == (stats.bytes, 0)
    service.compact(s.id, Always(), SummarizeAllButTwo(tokens_saved=7))
    stats = service.window_stats(s.id)
    assert (stats.events, stats.turns, stats.uncounted, stats.events_since_summary) == (3, 1, 1, 2)
    assert [r.token_count for r in service.records(s.id) if r.kind == "event"][:2] == [
        len("User: question 0"),
        len("Assistant: answer 0"),
    ]


# --- event ids --------------------------------------------------------------------------------------


def test_an_event_id_stays_taken_whatever_became_of_its_event(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    conversation(service, s.id, 3)
    archived = service.get_events(s.id)[0]
    summary = service.compact(s.id, Always(), SummarizeAllButTwo()).compacted[0]
    superseded = service.compact(s.id, Always(), SummarizeAllButTwo()).compacted[0]
    assert [e.id for e in service.get_events(s.id) if e.archived][-1] == summary.id
    rewound = event(s.id, "rewound", invocation_id="undone")
    assert service.append_event(rewound)
    service.rewind(s.id, "undone")
    version = service.event_version(s.id)
    for used in (archived, summary, superseded, rewound):
        assert service.append_event(event(s.id, "again", id=used.id)) is False
    fresh = unique("e")
    outcomes = service.ingest([event(s.id, "first", id=fresh), event(s.id, "second", id=fresh),
                               event(s.id, "old", id=rewound.id)])  # fmt: skip
    assert [o.value for o in outcomes] == ["stored", "duplicate", "duplicate"]
    assert service.event_version(s.id) == version + 1
    assert [m.text for m in service.get_messages(s.id)][-1] == "first"


class Returns:
    """A strategy whose result is made by `make(request)`."""

    def __init__(self, make) -> None:
        self.make = make

    def compact(self, request) -> CompactionResult:
        return self.make(request)


def synthetic(session_id: str, text: str, **fields) -> SessionEvent:
    return SessionEvent(
        session_id=session_id, message=AssistantMessage(text), metadata={"synthetic": True}, **fields
    )


def test_a_compaction_writes_no_taken_or_repeated_event_id(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    conversation(service, s.id, 3)
    archived = service.get_events(s.id)[0]
    service.compact(s.id, Always(), SummarizeAllButTwo())
    rewound = event(s.id, "rewound", invocation_id="undone")
    service.append_event(rewound)
    service.rewind(s.id, "undone")
    conversation(service, s.id, 1)
    service.fill_token_counts(s.id)  # as the compactions below do first: their records stay as they are
    version, window, records = service.event_version(s.id), service.get_messages(s.id), service.records(s.id)
    repeated = unique("summary")
    results = {
        "an archived event's id": lambda r: CompactionResult(
            (synthetic(s.id, "sum", id=archived.id), *r.events[-1:]), r.events[:-1]),
        "a rewound event's id": lambda r: CompactionResult(
            (synthetic(s.id, "sum", id=rewound.id), *r.events[-1:]), r.events[:-1]),
        "one new id twice": lambda r: CompactionResult(
            (synthetic(s.id, "a", id=repeated), synthetic(s.id, "b", id=repeated)), r.events),
        "a kept event twice": lambda r: CompactionResult(
            (synthetic(s.id, "sum"), r.events[-1], r.events[-1]), r.events[:-1]),
    }  # fmt: skip
    for name, make in results.items():
        with pytest.raises(ValueError, match="event id"):
            service.compact(s.id, Always(), Returns(make))
        assert service.event_version(s.id) == version, name
        assert service.get_messages(s.id) == window, name
        assert service.records(s.id) == records, name


# --- bad input ------------------------------------------------------------------------------------


def test_bad_input_changes_nothing(database_url: str) -> None:
    with open_service(database_url, max_payload_bytes=2000) as service:
        s = service.create_session(unique("u"))
        service.append_message(s.id, UserMessage("ok"))
        for bad in ("", None):
            with pytest.raises(ValueError):
                service.create_session(bad)
        with pytest.raises(ValueError):
            service.create_session(unique("u"), session_id="")
        with pytest.raises(ValueError):
            service.create_session(unique("u"), metadata={"when": datetime.now(UTC)})
        with pytest.raises(ValueError):
            service.create_session(unique("u"), state={"x": float("nan")})
        with pytest.raises(ValueError):
            service.append_message(s.id, UserMessage("x"), metadata={"obj": object()})
        with pytest.raises(ValueError):
            service.append_message(s.id, UserMessage("x"), state_delta={"s": {1, 2}})
        with pytest.raises(ValueError, match="2000"):
            service.append_message(s.id, UserMessage("x" * 3000))
        with pytest.raises(ValueError):
            service.get_events("")
        with pytest.raises(ValueError):
            service.append_event("not an event")  # type: ignore[arg-type]
        assert service.event_version(s.id) == 1
        assert [m.text for m in service.get_messages(s.id)] == ["ok"]
        assert service.get_session(s.id).state == {}
        assert len(service.records(s.id)) == 2


def test_default_payload_limit_is_one_mebibyte(service: SessionService) -> None:
    s = service.create_session(unique("u"))
    with pytest.raises(ValueError, match="1048576"):
        service.append_message(s.id, UserMessage("x" * (1024 * 1024)))
    service.append_message(s.id, UserMessage("x" * 500_000))
    assert service.event_version(s.id) == 1


# --- batch ingest ---------------------------------------------------------------------------------


def test_ingest_batch(service: SessionService) -> None:
    a, b = service.create_session(unique("u")), service.create_session(unique("u"))
    first = event(a.id, "a1")
    service.append_event(first)
    missing = unique("missing")
    batch = [event(b.id, "b1"), first, event(a.id, "a2"), event(missing, "x"), event(b.id, "b2")]
    batch.append(batch[0])  # a duplicate inside the batch
    outcomes = service.ingest(batch)
    assert [o.value for o in outcomes] == [
        "stored",
        "duplicate",
        "stored",
        "no_session",
        "stored",
        "duplicate",
    ]
    assert texts(service.get_events(a.id)) == ["a1", "a2"]
    assert texts(service.get_events(b.id)) == ["b1", "b2"]
    assert (service.event_version(a.id), service.event_version(b.id)) == (2, 2)
    assert [r.position for r in service.records(b.id)] == [1, 2, 3]
    service.append_message(b.id, UserMessage("b3"))  # the single-event path after a batch
    assert [m.text for m in service.get_messages(b.id)] == ["b1", "b2", "b3"]
    assert chain_problems(service.records(b.id)) == []


# --- bootstrap and pushdown -----------------------------------------------------------------------


def test_open_service_defaults(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SESSIONLEDGER_DATABASE_URL", raising=False)
    with open_service() as service:
        sid = service.create_session("u").id
    assert (tmp_path / "sessionledger.db").exists()
    with open_service() as service:  # durable: the same file again
        assert service.get_session(sid) is not None
    with open_service("memory://") as first, open_service("memory://") as second:
        first.create_session("u", session_id="same")
        assert second.get_session("same") is None  # each memory:// open is a fresh store
    with pytest.raises(ValueError):
        open_service("memory://", no_such_option=1)
    with pytest.raises(ValueError):
        open_service("oracle://nowhere/db")


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_filters_run_in_sql(backend: str, request: pytest.FixtureRequest) -> None:
    """Keyword, paging and last_n reach the database as LIKE ... ESCAPE and LIMIT, not Python."""
    import sqlalchemy as sa

    url = sql_url(request, backend, shared=True)
    with open_service(url) as service:
        s = service.create_session(unique("u"))
        for i in range(30):
            service.append_message(s.id, UserMessage(f"message {i}"))
        statements: list[str] = []
        engine = service.ledger.engine  # type: ignore[attr-defined]
        sa.event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        found = service.get_events(s.id, EventFilter.keyword_search("MESSAGE 1", page=1, page_size=3))
        assert texts(found) == ["message 12", "message 13", "message 14"]
        searched = [sql for sql in statements if "LIKE" in sql]  # besides it, the plan's head read
        assert len(searched) == 1 and "ESCAPE" in searched[0] and "LIMIT" in searched[0]
        assert len(statements) <= (1 if backend == "mariadb" else 2)
        statements.clear()
        assert texts(service.get_events(s.id, EventFilter.last(2))) == ["message 28", "message 29"]
        assert statements and all("LIMIT" in sql for sql in statements)
