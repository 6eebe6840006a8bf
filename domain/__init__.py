"""The pure domain: messages, events, sessions, filters and turns (no I/O).

Each name but the turns' is imported from its module on first use, so that a program needing one
part (the command line's `--version` needs none) does not load the rest (the filters' `regex`).
`turns` and `format_event` are bound at once: `turns` is also this package's submodule, which an
import of it would otherwise put in the function's place.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from sessionledger.domain.turns import format_event, turns

if TYPE_CHECKING:
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

_HOMES = {
    "ConcurrencyConflict": "errors",
    "SessionNotFound": "errors",
    "SessionEvent": "events",
    "EventFilter": "filters",
    "MatchMode": "filters",
    **dict.fromkeys(
        (
            "AssistantMessage",
            "Message",
            "MessageType",
            "SystemMessage",
            "ToolCall",
            "ToolResponse",
            "ToolResponseMessage",
            "UserMessage",
            "from_openai",
            "to_openai",
        ),
        "messages",
    ),
    "Session": "sessions",
}
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


def __getattr__(name: str) -> Any:
    """Import a name's module on first use and keep the name, so later lookups are plain reads."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
