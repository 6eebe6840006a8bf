"""The pure domain: messages, events, sessions, filters and turns (no I/O).

Each name but the turns' is imported from its module on first use, so that a program needing one
part (the command line's `--version` needs none) does not load the rest (the filters' `regex`).
`turns` and `format_event` are bound at once: `turns` is also this package's submodule, which an
import of it would otherwise put in the function's place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionledger.domain.lazy_names import lazy_names
from sessionledger.domain.turns import format_event, turns

if TYPE_CHECKING:
    from sessionledger.domain.errors import ConcurrencyConflict, SessionExists, SessionNotFound
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
    "SessionExists": "errors",
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
    "SessionExists",
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


__getattr__, __dir__ = lazy_names(
    __name__, {name: f"{__name__}.{module}" for name, module in _HOMES.items()}, __all__
)
