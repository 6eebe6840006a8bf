"""`Advisor`: what wraps one model call (reads memory into the prompt before, stores the reply after)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from sessionledger.domain.filters import EventFilter
from sessionledger.domain.messages import Message


@runtime_checkable
class Advisor(Protocol):
    """Spring AI's advisor reduced to its two halves; any number of them wrap one call.

    `before` gets the request's messages and returns the messages to send (history added, say);
    `after` gets the model's replies. Both receive the caller's user, never one a model chose.
    """

    def before(
        self,
        conversation_id: str,
        messages: list[Message],
        *,
        user_id: str | None = None,
        event_filter: EventFilter | None = None,
    ) -> list[Message]: ...

    def after(self, conversation_id: str, replies: list[Message], *, user_id: str | None = None) -> None: ...


@runtime_checkable
class AsyncAdvisor(Protocol):
    """`Advisor` for `AsyncMemoryChat`: the same two halves and meaning, as coroutines."""

    async def before(
        self,
        conversation_id: str,
        messages: list[Message],
        *,
        user_id: str | None = None,
        event_filter: EventFilter | None = None,
    ) -> list[Message]: ...

    async def after(
        self, conversation_id: str, replies: list[Message], *, user_id: str | None = None
    ) -> None: ...
