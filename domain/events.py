"""`SessionEvent`: one immutable entry of a session's event log (docs/api.md "SessionEvent")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from sessionledger.domain.fast_constructor import fast_constructor
from sessionledger.domain.ids import check_new_id
from sessionledger.domain.mappings import EMPTY, freeze
from sessionledger.domain.messages import Message, MessageType
from sessionledger.domain.times import in_utc


def _new_id() -> str:
    """A random (version 4) UUID as text, as `str(uuid.uuid4())` writes it: built from the bytes
    directly, since `UUID`'s integer conversions cost three times as much, on every append."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SessionEvent:
    """A message in a session, with its metadata; equal (and hashed) by `(id, session_id)` only."""

    SYNTHETIC: ClassVar[str] = "synthetic"
    COMPACTION_SOURCE: ClassVar[str] = "compactionSource"

    session_id: str
    message: Message
    id: str = field(default_factory=_new_id)
    timestamp: datetime = field(default_factory=_now)
    metadata: Mapping[str, Any] = EMPTY
    branch: str | None = None
    archived: bool = False
    invocation_id: str | None = None
    state_delta: Mapping[str, Any] = EMPTY

    def __post_init__(self) -> None:
        timestamp = _checked_fields(
            self.id,
            self.session_id,
            self.timestamp,
            self.message,
            self.branch,
            self.archived,
            self.invocation_id,
        )
        if timestamp is not self.timestamp:
            object.__setattr__(self, "timestamp", timestamp)
        object.__setattr__(self, "metadata", freeze(self.metadata, "metadata"))
        object.__setattr__(self, "state_delta", freeze(self.state_delta, "state_delta"))

    @classmethod
    def _checked(
        cls,
        id: str,
        session_id: str,
        timestamp: datetime,
        message: Message,
        metadata: Mapping[str, Any] | None,
        branch: str | None,
        archived: bool,
        invocation_id: str | None,
        state_delta: Mapping[str, Any] | None,
    ) -> SessionEvent:
        """The event of these fields, checked as the constructor checks them, for a caller that has
        every field already (an ingest worker decoding thousands of events a second): built on the
        twin as `_trusted` builds, without the constructor's keyword and default handling."""
        return cls._trusted(
            id,
            session_id,
            _checked_fields(id, session_id, timestamp, message, branch, archived, invocation_id),
            message,
            freeze(metadata, "metadata"),
            branch,
            archived,
            invocation_id,
            freeze(state_delta, "state_delta"),
        )

    @classmethod
    def _new(
        cls,
        session_id: str,
        message: Message,
        branch: str | None,
        metadata: Mapping[str, Any] | None,
        state_delta: Mapping[str, Any] | None,
    ) -> SessionEvent:
        """A new event (a fresh id, the time now) of the caller's fields, checked as the
        constructor checks them: an append's event, built in half the constructor's time (its
        keyword and default-factory handling, and the checks of the fields made here)."""
        _check_session_id(session_id)
        _check_message(message)
        _check_branch(branch)
        return cls._trusted(
            _new_id(),
            session_id,
            _now(),
            message,
            freeze(metadata, "metadata"),
            branch,
            False,
            None,
            freeze(state_delta, "state_delta"),
        )

    @classmethod
    def _trusted(
        cls,
        id: str,
        session_id: str,
        timestamp: datetime,
        message: Message,
        metadata: Mapping[str, Any],
        branch: str | None,
        archived: bool,
        invocation_id: str | None,
        state_delta: Mapping[str, Any],
    ) -> SessionEvent:
        """Build without validation: for the ledger's read path, whose values were validated on
        write (`fast_constructor`: about twice as fast as the frozen dataclass's constructor)."""
        return _build_event(
            id,
            session_id,
            timestamp,
            message,
            freeze(metadata),
            branch,
            archived,
            invocation_id,
            freeze(state_delta),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionEvent):
            return NotImplemented
        return self.id == other.id and self.session_id == other.session_id

    def __hash__(self) -> int:
        return hash((self.id, self.session_id))

    @property
    def type(self) -> MessageType:
        return self.message.type

    @property
    def is_synthetic(self) -> bool:
        """Written by a compaction (a shadow prompt or a summary), not by the conversation."""
        return self.metadata.get(SessionEvent.SYNTHETIC) is True

    @property
    def is_root(self) -> bool:
        return self.branch is None

    @property
    def has_tool_calls(self) -> bool:
        return self.message.type is MessageType.ASSISTANT and bool(self.message.tool_calls)

    def with_archived(self, archived: bool = True) -> SessionEvent:
        """This event with the `archived` flag set (itself when it already has that value)."""
        if self.archived is archived:
            return self
        return SessionEvent._trusted(
            self.id,
            self.session_id,
            self.timestamp,
            self.message,
            self.metadata,
            self.branch,
            archived,
            self.invocation_id,
            self.state_delta,
        )


def _checked_fields(
    id: object,
    session_id: object,
    timestamp: object,
    message: object,
    branch: object,
    archived: object,
    invocation_id: object,
) -> datetime:
    """The constructor's checks of an event's fields (`ValueError` saying what is wrong), shared
    by `SessionEvent._checked`; returns the timestamp in UTC (itself when it is already)."""
    if not isinstance(id, str) or not id:
        raise ValueError("id must not be empty")
    check_new_id(id, "id")
    _check_session_id(session_id)
    _check_message(message)
    if not isinstance(timestamp, datetime):
        raise ValueError("timestamp must be a datetime")
    if timestamp.tzinfo is None or timestamp.utcoffset() is None:
        raise ValueError("timestamp must be timezone-aware")
    _check_branch(branch)
    if invocation_id is not None:
        if not isinstance(invocation_id, str):
            raise ValueError("invocation_id must be None or a string")
        check_new_id(invocation_id, "invocation_id")
    if not isinstance(archived, bool):
        raise ValueError("archived must be a bool")
    return in_utc(timestamp, "timestamp")


def _check_session_id(value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError("session_id must not be empty")
    check_new_id(value, "session_id")


def _check_message(value: object) -> None:
    if not isinstance(value, Message):
        raise ValueError(f"message must be a Message, got {type(value).__name__}")


def _check_branch(value: object) -> None:
    if value is not None:
        if not isinstance(value, str) or not value:
            raise ValueError("branch must be None or a non-empty string")
        check_new_id(value, "branch")


_build_event = fast_constructor(
    SessionEvent,
    (
        "id",
        "session_id",
        "timestamp",
        "message",
        "metadata",
        "branch",
        "archived",
        "invocation_id",
        "state_delta",
    ),
)
