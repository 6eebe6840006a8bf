"""SessionEvent: defaults, validation, derived properties, identity and the trusted constructor."""

from __future__ import annotations

import dataclasses
import pickle
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from freezegun import freeze_time
from sessionledger.domain import (
    AssistantMessage,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)


def event(**overrides) -> SessionEvent:
    return SessionEvent(**{"session_id": "s1", "message": UserMessage("hi"), **overrides})


def test_constants():
    assert SessionEvent.SYNTHETIC == "synthetic"
    assert SessionEvent.COMPACTION_SOURCE == "compactionSource"


@freeze_time("2025-03-01 12:00:00")
def test_defaults():
    e = event()
    assert uuid.UUID(e.id).version == 4
    assert e.timestamp == datetime(2025, 3, 1, 12, tzinfo=UTC)
    assert (e.metadata, e.state_delta, e.branch, e.archived, e.invocation_id) == ({}, {}, None, False, None)
    assert event().id != e.id


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"session_id": ""}, "session_id must not be empty"),
        ({"session_id": None}, "session_id must not be empty"),
        ({"id": ""}, "id must not be empty"),
        ({"message": None}, "message must be a Message"),
        ({"timestamp": datetime(2025, 1, 1)}, "timestamp must be timezone-aware"),
        ({"timestamp": "2025-01-01"}, "timestamp must be a datetime"),
        ({"branch": ""}, "branch must be None or a non-empty string"),
        ({"metadata": ["not", "a", "mapping"]}, "expected a mapping"),
    ],
)
def test_validation(overrides, problem):
    with pytest.raises(ValueError, match=problem):
        event(**overrides)


def test_session_id_is_required():
    with pytest.raises(TypeError):
        SessionEvent(message=UserMessage("hi"))  # type: ignore[call-arg]


def test_timestamps_are_normalised_to_utc():
    paris = timezone(timedelta(hours=2))
    e = event(timestamp=datetime(2025, 6, 1, 14, 0, tzinfo=paris))
    assert e.timestamp == datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    assert e.timestamp.tzinfo is UTC


def test_properties():
    plain = event()
    assert plain.type == "user"
    assert plain.is_root and not plain.is_synthetic and not plain.has_tool_calls
    assert not event(branch="orch").is_root
    assert event(metadata={"synthetic": True}).is_synthetic
    assert not event(metadata={"synthetic": "true"}).is_synthetic
    assert not event(metadata={"synthetic": 1}).is_synthetic
    calls = event(message=AssistantMessage(None, [ToolCall("c", "f", "{}")]))
    assert calls.has_tool_calls and calls.type == "assistant"
    assert not event(message=AssistantMessage("no calls")).has_tool_calls
    assert not event(message=ToolResponseMessage([ToolResponse("c", "f", "x")])).has_tool_calls


def test_equality_and_hash_use_id_and_session_id_only():
    a = event(id="e1", message=UserMessage("one"))
    b = event(id="e1", message=UserMessage("two"), archived=True)
    assert a == b and hash(a) == hash(b)
    assert a != event(id="e1", session_id="s2")
    assert a != event(id="e2")
    assert len({a, b, event(id="e2")}) == 2


def test_immutable_and_read_only_mappings():
    e = event(metadata={"k": 1}, state_delta={"x": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.archived = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        e.metadata["k"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        e.state_delta.update(y=2)  # type: ignore[attr-defined]


def test_with_archived_copies_and_keeps_identity():
    e = event(metadata={"k": 1})
    archived = e.with_archived()
    assert archived.archived and not e.archived
    assert archived == e and archived.message == e.message and archived.metadata == e.metadata
    assert archived.with_archived(True) is archived
    assert archived.with_archived(False).archived is False


def test_trusted_constructor_builds_a_real_event():
    ts = datetime(2025, 1, 1, tzinfo=UTC)
    e = SessionEvent._trusted("e1", "s1", ts, UserMessage("hi"), {"k": 1}, "b", True, "inv", {"x": 2})
    assert type(e) is SessionEvent
    assert e == event(id="e1")
    assert (e.timestamp, e.branch, e.archived, e.invocation_id) == (ts, "b", True, "inv")
    with pytest.raises(TypeError):
        e.metadata["k"] = 3  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.branch = None  # type: ignore[misc]
    assert dataclasses.replace(e, archived=False).archived is False


def test_events_pickle():
    e = event(metadata={"synthetic": True})
    copy = pickle.loads(pickle.dumps(e))
    assert copy == e and copy.metadata == e.metadata and copy.timestamp == e.timestamp


# --- ids every backend can store and index --------------------------------------------------------


@pytest.mark.parametrize("field", ["session_id", "id", "branch", "invocation_id"])
def test_ids_hold_no_nul_and_at_most_255_characters(field):
    assert getattr(event(**{field: "𝄞" * 255}), field) == "𝄞" * 255  # 4-byte characters: still indexable
    with pytest.raises(ValueError, match=f"^{field} is 256 characters long; ids are at most 255$"):
        event(**{field: "x" * 256})
    with pytest.raises(ValueError, match=f"^{field} contains a NUL character"):
        event(**{field: "a\x00b"})


@pytest.mark.parametrize("field", ["metadata", "state_delta"])
def test_a_mapping_field_that_is_no_mapping_is_named(field):
    with pytest.raises(ValueError, match=f"^{field}: expected a mapping, got list$"):
        event(**{field: [("k", "v")]})


# --- a new event of an append (`SessionEvent._new`) ----------------------------------------------


@freeze_time("2025-03-01 12:00:00")
def test_a_new_event_is_the_event_the_constructor_makes():
    made = SessionEvent._new("s1", UserMessage("hi"), "b", {"k": 1}, None)
    assert type(made) is SessionEvent
    assert uuid.UUID(made.id).version == 4 and str(uuid.UUID(made.id)) == made.id
    assert made.timestamp == datetime(2025, 3, 1, 12, tzinfo=UTC) and made.timestamp.tzinfo is UTC
    assert (made.session_id, made.message, made.branch) == ("s1", UserMessage("hi"), "b")
    assert (made.metadata, made.state_delta, made.archived, made.invocation_id) == ({"k": 1}, {}, False, None)
    with pytest.raises(TypeError):
        made.metadata["k"] = 2  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.branch = None  # type: ignore[misc]
    assert len({SessionEvent._new("s1", UserMessage("hi"), None, None, None).id for _ in range(1000)}) == 1000


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"session_id": ""}, "^session_id must not be empty$"),
        ({"session_id": None}, "^session_id must not be empty$"),
        ({"session_id": "x" * 256}, "^session_id is 256 characters long; ids are at most 255$"),
        ({"session_id": "a\x00b"}, "^session_id contains a NUL character"),
        ({"message": "hi"}, "^message must be a Message, got str$"),
        ({"branch": ""}, "^branch must be None or a non-empty string$"),
        ({"branch": "a\x00b"}, "^branch contains a NUL character"),
        ({"metadata": [("k", "v")]}, "^metadata: expected a mapping, got list$"),
        ({"state_delta": [("k", "v")]}, "^state_delta: expected a mapping, got list$"),
    ],
)
def test_a_new_event_is_checked_as_the_constructor_checks_one(fields, problem):
    given = {
        "session_id": "s1",
        "message": UserMessage("hi"),
        "branch": None,
        "metadata": None,
        "state_delta": None,
    }
    given |= fields
    with pytest.raises(ValueError, match=problem):
        SessionEvent._new(**given)
    with pytest.raises(ValueError, match=problem):
        SessionEvent(**{name: value for name, value in given.items() if value is not None or name in fields})


# --- an event of given fields (`SessionEvent._checked`, the ingest workers' decode) ---------------

_FIELDS = {
    "id": "e1",
    "session_id": "s1",
    "timestamp": datetime(2025, 3, 1, 12, tzinfo=UTC),
    "message": UserMessage("hi"),
    "metadata": {"k": 1},
    "branch": "b",
    "archived": False,
    "invocation_id": "i1",
    "state_delta": {"x": [1]},
}


def test_a_checked_event_is_the_event_the_constructor_makes():
    elsewhere = datetime(2025, 3, 1, 14, tzinfo=timezone(timedelta(hours=2)))
    for fields in (_FIELDS, _FIELDS | {"timestamp": elsewhere, "branch": None, "invocation_id": None}):
        made, built = SessionEvent._checked(**fields), SessionEvent(**fields)
        assert type(made) is SessionEvent
        assert [getattr(made, name) for name in _FIELDS] == [getattr(built, name) for name in _FIELDS]
        assert made.timestamp.tzinfo is UTC
        with pytest.raises(TypeError):
            made.state_delta["x"] = 2  # type: ignore[index]
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.branch = None  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"id": ""}, "^id must not be empty$"),
        ({"id": 7}, "^id must not be empty$"),
        ({"id": "x" * 256}, "^id is 256 characters long; ids are at most 255$"),
        ({"session_id": None}, "^session_id must not be empty$"),
        ({"session_id": "a\x00b"}, "^session_id contains a NUL character"),
        ({"message": {"type": "user"}}, "^message must be a Message, got dict$"),
        ({"timestamp": "2025-03-01T12:00:00+00:00"}, "^timestamp must be a datetime$"),
        ({"timestamp": datetime(2025, 3, 1, 12)}, "^timestamp must be timezone-aware$"),
        ({"branch": ""}, "^branch must be None or a non-empty string$"),
        ({"invocation_id": 3}, "^invocation_id must be None or a string$"),
        ({"invocation_id": "i\x00"}, "^invocation_id contains a NUL character"),
        ({"archived": 1}, "^archived must be a bool$"),
        ({"metadata": [("k", "v")]}, "^metadata: expected a mapping, got list$"),
        ({"state_delta": "x"}, "^state_delta: expected a mapping, got str$"),
    ],
)
def test_a_checked_event_is_refused_as_the_constructor_refuses_it(fields, problem):
    given = _FIELDS | fields
    with pytest.raises(ValueError, match=problem):
        SessionEvent._checked(**given)
    with pytest.raises(ValueError, match=problem):
        SessionEvent(**given)
