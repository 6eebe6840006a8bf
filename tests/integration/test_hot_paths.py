"""The ledger's fast paths return what its general paths do: the active window read on the driver
(events, messages, payloads) against the same filter through SQLAlchemy Core, on memory, SQLite
and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sessionledger.domain import AssistantMessage, EventFilter, SessionEvent, UserMessage
from sessionledger.domain.codec import event_to_payload
from sessionledger.infrastructure import SessionService, open_service

from tests.fakes.compaction import SummarizeAllButTwo

SAME_AS_ACTIVE = EventFilter(exclude_archived=True, page_size=10_000)
"""The active window, by a filter the fast path does not take (paged: the general statement)."""


class Always:
    def should_compact(self, request: object) -> bool:
        return True


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


def _window(service: SessionService, session_id: str) -> list[tuple[str, str | None, bool]]:
    fast = service.get_events(session_id, EventFilter.active())
    assert [(e.id, e.message.text, e.archived) for e in fast] == [
        (e.id, e.message.text, e.archived) for e in service.get_events(session_id, SAME_AS_ACTIVE)
    ]
    assert [m.text for m in service.get_messages(session_id)] == [e.message.text for e in fast]
    assert service.ledger.payloads(session_id, dict) == [event_to_payload(e) for e in fast]
    return [(e.id, e.message.text, e.archived) for e in fast]


def test_the_active_window_read_matches_the_general_read(service: SessionService) -> None:
    session_id = service.create_session(f"u-{uuid.uuid4().hex[:8]}").id
    assert _window(service, session_id) == []
    for i in range(3):
        service.append_message(session_id, UserMessage(f"q{i}"))
        service.append_message(session_id, AssistantMessage(f"a{i}"), branch="b" if i == 1 else None)
    assert len(_window(service, session_id)) == 6
    service.compact(session_id, Always(), SummarizeAllButTwo())  # a prefix: summary, then two kept
    service.append_message(session_id, UserMessage("after the compaction"))
    service.append_event(
        SessionEvent(session_id=session_id, message=UserMessage("undone"), invocation_id="inv-undo")
    )
    service.append_message(session_id, AssistantMessage("also undone"))
    service.rewind(session_id, "inv-undo")
    window = _window(service, session_id)
    assert [text for _, text, _ in window] == ["summary of 4", "q2", "a2", "after the compaction"]
    assert not any(archived for _, _, archived in window)


def test_an_unknown_or_deleted_session_has_no_window(service: SessionService) -> None:
    assert service.get_messages("no-such-session") == []
    assert service.ledger.payloads("no-such-session", dict) == []
    session_id = service.create_session("u").id
    service.append_message(session_id, UserMessage("gone soon"))
    service.delete_session(session_id)
    assert _window(service, session_id) == []


def test_payloads_come_back_exactly_as_stored_whatever_json_they_hold(service: SessionService) -> None:
    """On PostgreSQL the driver hands each `json` value's buffer to orjson directly (`engine.py`):
    text, escapes, numbers at the ends of their range and nesting read back as they were written."""
    session_id = service.create_session(f"u-{uuid.uuid4().hex[:8]}").id
    metadata = {
        "ints": [-(2**63), -1, 0, 2**53 + 1, 2**63 - 1],
        "floats": [0.1, -2.5e-300, 1e300, 1e16],
        "text": 'quotes " and \\ and \n\t, émoji 🙂, 中文',
        "nested": {"empty": {}, "list": [], "none": None, "bools": [True, False]},
    }
    for text in ("plain", "é" * 3_000, "x" * 9_000):  # the long ones compressed by the server
        service.append_message(session_id, UserMessage(text), metadata=metadata)
    stored = service.get_events(session_id, EventFilter.active())
    assert service.ledger.payloads(session_id, dict) == [event_to_payload(e) for e in stored]
    assert [e.metadata for e in stored] == [metadata] * 3
