"""`fast_constructor`: an instance of the frozen slotted class, as its constructor would build it
(without its checks), and frozen like one; classes whose layout a twin cannot share are refused."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.fast_constructor import fast_constructor
from sessionledger.domain.messages import Message, MessageType, UserMessage
from sessionledger.domain.records import Draft, Kind, LedgerRecord, event_draft


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int
    label: str = "p"


def test_the_result_is_the_frozen_class_equal_to_the_constructed_one_and_frozen():
    build = fast_constructor(Point, ("label", "x", "y"))  # any order the caller names
    point = build("q", 1, 2)
    assert type(point) is Point and point == Point(1, 2, "q")
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 3  # type: ignore[misc]
    assert dataclasses.replace(point, x=3) == Point(3, 2, "q")


def test_the_domain_values_built_by_it_are_their_classes():
    at = datetime(2026, 1, 1, tzinfo=UTC)
    message = Message._trusted(MessageType.USER, "hi", (), (), {})
    assert type(message) is Message and message == UserMessage("hi")
    event = SessionEvent._trusted("e", "s", at, message, {}, None, False, None, {})
    assert type(event) is SessionEvent and event.timestamp == at
    draft = event_draft(event)
    assert type(draft) is Draft and draft.expected_version is None
    record = draft.place("s", 1, 1, "0" * 64, at)
    assert type(record) is LedgerRecord and record.kind is Kind.EVENT and record.recorded_at == at
    for value in (message, event, draft, record):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)


class Loose:
    """No slots: instances keep a `__dict__`, which a twin would not have."""

    def __init__(self, x: int) -> None:
        self.x = x


class Base:
    __slots__ = ("x",)


class Derived(Base):
    __slots__ = ("y",)


@pytest.mark.parametrize(
    ("cls", "fields"),
    [
        (Loose, ("x",)),
        (Derived, ("x", "y")),  # a slotted base: the twin's layout would differ
        (Point, ("x", "y")),  # a slot left out
        (Point, ("x", "y", "label", "x")),  # one named twice
        (Point, ("x", "y", "z")),  # one it does not have
    ],
)
def test_a_class_or_fields_a_twin_cannot_fill_are_refused(cls: type, fields: tuple[str, ...]):
    with pytest.raises(TypeError):
        fast_constructor(cls, fields)
