"""The pure domain: messages, events, sessions, filters and turns (no I/O)."""

from sessionledger.domain.errors import ConcurrencyConflict, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.filters import EventFilter, MatchMode
from sessionledger.domain.messages import (
    AssistantMessage,
    Message,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    from_openai,
    to_openai,
)
from sessionledger.domain.sessions import Session
from sessionledger.domain.turns import format_event, turns

__all__ = [
    "AssistantMessage",
    "ConcurrencyConflict",
    "EventFilter",
    "MatchMode",
    "Message",
    "MessageType",
    "Session",
    "SessionEvent",
    "SessionNotFound",
    "SystemMessage",
    "ToolCall",
    "ToolResponse",
    "ToolResponseMessage",
    "UserMessage",
    "format_event",
    "from_openai",
    "to_openai",
    "turns",
]
