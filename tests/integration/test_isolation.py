"""No session leaks across users: every entry point that takes a session id, on behalf of a user.

One table, run on memory, SQLite and PostgreSQL: each entry point against the user's own session,
another user's session and an unknown one. Another user's session answers exactly as an unknown
one does (reads) or is refused with the `ValueError` every write gives (writes; the batch ingest
path answers `REFUSED` per event), and nothing about it changes. Session ids are unique across
users, so `create_session` with an id someone else holds must say nothing about that session.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from sessionledger.domain import AssistantMessage, EventFilter, SessionEvent, SessionExists, UserMessage
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.infrastructure import SessionService, audit, open_service
from sessionledger.infrastructure.agents import RecallTools

from tests.conftest import SQL_BACKENDS, backend_url
from tests.fakes.compaction import Always, SummarizeAllButTwo

FIRST_EVENT = "first-question"
BEFORE_YEAR_ONE = datetime.fromisoformat("0001-01-01T00:00:00+14:00")
AFTER_9999 = datetime.fromisoformat("9999-12-31T23:59:59-14:00")


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


@pytest.fixture(params=["memory", *SQL_BACKENDS])
def fresh_service(request: pytest.FixtureRequest) -> Iterator[SessionService]:
    """`service` on a fresh database, for a test that reads every session of the ledger."""
    url = backend_url(request, request.param)
    with open_service(url) as svc:
        yield svc


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def conversation(service: SessionService, user_id: str) -> str:
    """Three turns, one invocation each (`inv-0`..`inv-2`), compacted, then one uncounted message."""
    session_id = service.create_session(user_id, app_name="chat", state={"topic": "isolation"}).id
    for turn in range(3):
        for message in (UserMessage(f"secret {turn}"), AssistantMessage(f"answer {turn}")):
            event = SessionEvent(session_id=session_id, message=message, invocation_id=f"inv-{turn}")
            service.append_event(event if turn or message.text != "secret 0" else _first(event))
    service.compact(session_id, Always(), SummarizeAllButTwo())
    service.append_message(session_id, UserMessage("and one more"))
    return session_id


def _first(event: SessionEvent) -> SessionEvent:
    return SessionEvent(
        id=FIRST_EVENT, session_id=event.session_id, message=event.message, invocation_id=event.invocation_id
    )


@dataclass(frozen=True)
class EntryPoint:
    name: str
    call: Callable[[SessionService, str, str | None], Any]
    writes: bool = False

    def __str__(self) -> str:
        return self.name


def _injected(session_id: str) -> list[SessionEvent]:
    return [SessionEvent(session_id=session_id, message=UserMessage("injected"))]


ENTRY_POINTS = [
    EntryPoint("event_version", lambda s, sid, u: s.event_version(sid, user_id=u)),
    EntryPoint("window_stats", lambda s, sid, u: s.window_stats(sid, user_id=u)),
    EntryPoint("fill_token_counts", lambda s, sid, u: s.fill_token_counts(sid, user_id=u)),
    EntryPoint("records", lambda s, sid, u: s.records(sid, user_id=u)),
    EntryPoint("replay", lambda s, sid, u: s.replay(sid, user_id=u)),
    EntryPoint("audit.replay", lambda s, sid, u: audit.replay(s, sid, user_id=u)),
    EntryPoint("audit.replay at a version", lambda s, sid, u: audit.replay(s, sid, version=1, user_id=u)),
    EntryPoint(
        "audit.what_the_model_saw", lambda s, sid, u: audit.what_the_model_saw(s, sid, FIRST_EVENT, user_id=u)
    ),
    EntryPoint("audit.timeline", lambda s, sid, u: audit.timeline(s, sid, user_id=u)),
    EntryPoint("audit.export_lines", lambda s, sid, u: list(audit.export_lines(s, sid, user_id=u))[1:]),
    EntryPoint("audit.verify", lambda s, sid, u: audit.verify(s, sid, user_id=u)),
    EntryPoint(
        "compact", lambda s, sid, u: s.compact(sid, Always(), SummarizeAllButTwo(), user_id=u), writes=True
    ),
    EntryPoint("rewind", lambda s, sid, u: s.rewind(sid, "inv-2", user_id=u), writes=True),
    EntryPoint("ingest", lambda s, sid, u: s.ingest(_injected(sid), user_id=u), writes=True),
]


def answer(service: SessionService, entry: EntryPoint, session_id: str, user_id: str | None) -> Any:
    """What the entry point answers: its result, or the exception's type and text with the
    session id taken out (so the answers for two sessions can be compared)."""
    try:
        return entry.call(service, session_id, user_id)
    except (LookupError, ValueError) as error:  # how the contract says "unknown" or "refused"
        return (type(error), str(error).replace(session_id, "<session>"))


def footprint(service: SessionService, session_id: str) -> tuple[Any, ...]:
    """Everything a write could change about a session, read on behalf of no one."""
    return (
        [(r.position, r.row_hash, r.token_count) for r in service.records(session_id)],
        service.event_version(session_id),
        service.window_stats(session_id),
        service.get_session(session_id),
        service.get_events(session_id),
    )


@pytest.fixture
def owned(service: SessionService) -> tuple[str, str]:
    """A user and their session."""
    owner = unique("alice")
    return owner, conversation(service, owner)


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=str)
def test_own_session_answers_as_without_a_user(service, owned, entry: EntryPoint) -> None:
    owner, session_id = owned
    version = service.event_version(session_id)
    if entry.name == "ingest":
        assert entry.call(service, session_id, owner) == [AppendOutcome.STORED]
        assert service.get_messages(session_id)[-1].text == "injected"
    elif entry.name == "rewind":
        assert entry.call(service, session_id, owner) == service.event_version(session_id) == version + 1
    elif entry.name == "compact":
        assert entry.call(service, session_id, owner).archived
        assert service.event_version(session_id) == version + 1
    elif entry.name == "fill_token_counts":  # it counts once (the events written after the compaction)
        assert entry.call(service, session_id, owner) > 0 == entry.call(service, session_id, None)
    else:
        found = answer(service, entry, session_id, owner)
        assert found == answer(service, entry, session_id, None)
        assert found != answer(service, entry, unique("missing"), None)


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=str)
def test_another_users_session_is_unknown_to_reads_and_refused_to_writes(
    service, owned, entry: EntryPoint
) -> None:
    _, session_id = owned
    intruder = service.create_session(unique("mallory")).user_id  # a user with sessions of their own
    before = footprint(service, session_id)

    if entry.name == "ingest":
        assert entry.call(service, session_id, intruder) == [AppendOutcome.REFUSED]
    elif entry.writes:
        refusal = f"^session '{re.escape(session_id)}' does not belong to user '{re.escape(intruder)}'$"
        with pytest.raises(ValueError, match=refusal):
            entry.call(service, session_id, intruder)
    else:
        missing = unique("missing")
        assert answer(service, entry, session_id, intruder) == answer(service, entry, missing, intruder)

    assert footprint(service, session_id) == before


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=str)
def test_an_unknown_session_answers_as_without_a_user(service, entry: EntryPoint) -> None:
    user = service.create_session(unique("bob")).user_id
    missing = unique("missing")
    assert answer(service, entry, missing, user) == answer(service, entry, missing, None)
    assert service.get_session(missing) is None and service.records(missing) == []


def test_ingest_refuses_only_the_events_of_sessions_the_identity_does_not_own(service) -> None:
    alice, bob = unique("alice"), unique("bob")
    mine = service.create_session(alice, app_name="chat").id
    other_app = service.create_session(alice, app_name="mail").id
    theirs = service.create_session(bob, app_name="chat").id
    missing = unique("missing")
    targets = {"mine": mine, "theirs": theirs, "other app": other_app, "missing": missing}

    def batch() -> list[SessionEvent]:
        return [
            SessionEvent(session_id=sid, message=UserMessage(f"to {name}")) for name, sid in targets.items()
        ]

    stored, refused, unknown = AppendOutcome.STORED, AppendOutcome.REFUSED, AppendOutcome.NO_SESSION
    assert service.ingest(batch(), user_id=alice) == [stored, refused, stored, unknown]
    assert service.ingest(batch(), app_name="chat") == [stored, stored, refused, unknown]
    assert service.ingest(batch(), user_id=alice, app_name="chat") == [stored, refused, refused, unknown]
    assert [m.text for m in service.get_messages(mine)] == ["to mine"] * 3
    assert [m.text for m in service.get_messages(theirs)] == ["to theirs"]
    assert [m.text for m in service.get_messages(other_app)] == ["to other app"]
    with pytest.raises(ValueError, match="user_id"):
        service.ingest(batch(), user_id="")


def test_verify_all_for_a_user_checks_only_that_users_sessions(fresh_service) -> None:
    service = fresh_service
    alice, bob = unique("alice"), unique("bob")
    hers = [conversation(service, alice), service.create_session(alice).id]
    his = conversation(service, bob)
    checked = list(audit.verify_all(service, user_id=alice))
    assert [result.session_id for result in checked] == hers
    assert all(result.ok for result in checked)
    assert {result.session_id for result in audit.verify_all(service)} == {*hers, his}


def test_creating_a_session_with_a_taken_id_tells_nothing_about_that_session(service) -> None:
    """The same error type and text (but for the id) for another user's live session, another
    user's deleted session and the caller's own session; and nothing changes."""
    alice, bob = unique("alice"), unique("bob")
    live = service.create_session(alice, session_id=unique("live")).id
    deleted = service.create_session(alice, session_id=unique("deleted")).id
    service.append_message(deleted, UserMessage("gone"))
    service.delete_session(deleted)
    own = service.create_session(bob, session_id=unique("own"), app_name="mine").id

    def everything() -> tuple[Any, ...]:
        return (
            [footprint(service, session_id) for session_id in (live, deleted, own)],
            service.list_sessions(alice),
            service.list_sessions(bob),
            service.get_user_state(bob, app_name="mine"),
            service.get_app_state("mine"),
        )

    before = everything()
    answers = set()
    for session_id in (live, deleted, own):
        with pytest.raises(ValueError) as refused:
            service.create_session(
                bob, session_id=session_id, app_name="mine", state={"user:k": 1, "app:k": 2}
            )
        text = str(refused.value)
        assert session_id in text
        for telling in ("exist", "delete", "live", "belong", alice, bob):
            assert telling not in text.replace(session_id, "<id>")
        answers.add((type(refused.value), text.replace(session_id, "<id>")))
    assert len(answers) == 1 and next(iter(answers))[0] is SessionExists  # a ValueError
    assert everything() == before


def test_a_failure_that_is_not_a_taken_id_keeps_its_own_error(service) -> None:
    with pytest.raises(ValueError) as refused:  # a lone surrogate cannot be stored as UTF-8
        service.create_session(unique("u"), session_id=unique("free"), state={"k": "\ud800"})
    assert "cannot create session" not in str(refused.value)


BAD_INPUT = [
    EntryPoint(
        "get_events from before year 1",
        lambda s, sid, u: s.get_events(sid, EventFilter(start=BEFORE_YEAR_ONE), user_id=u),
    ),
    EntryPoint(
        "audit.replay after year 9999", lambda s, sid, u: audit.replay(s, sid, at=AFTER_9999, user_id=u)
    ),
    EntryPoint(
        "append_event before year 1",
        lambda s, sid, u: s.append_event(
            SessionEvent(session_id=sid, message=UserMessage("x"), timestamp=BEFORE_YEAR_ONE), user_id=u
        ),
        writes=True,
    ),
    EntryPoint(
        "a recall call nested too deeply",
        lambda s, sid, u: RecallTools(s).handle(
            "conversation_search", "[" * 100_000, session_id=sid, user_id=u
        ),
    ),
    EntryPoint(
        "a recall call since before year 1",
        lambda s, sid, u: RecallTools(s).handle(
            "cross_session_search",
            '{"query": "", "since": "0001-01-01T00:00:00+14:00"}',
            session_id=sid,
            user_id=u,
        ),
    ),
]
"""Issue 25's bad input: refused before any session is read or written."""


@pytest.mark.parametrize("entry", BAD_INPUT, ids=str)
def test_bad_input_is_answered_alike_for_own_foreign_and_unknown_sessions(service, owned, entry) -> None:
    owner, session_id = owned
    intruder = service.create_session(unique("mallory")).user_id
    before = footprint(service, session_id)
    missing = unique("missing")
    answers = {
        answer(service, entry, session_id, owner),
        answer(service, entry, session_id, intruder),
        answer(service, entry, missing, intruder),
    }
    assert len(answers) == 1, answers
    assert footprint(service, session_id) == before
    assert service.get_session(missing) is None
