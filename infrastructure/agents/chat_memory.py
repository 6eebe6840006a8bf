"""Spring AI's chat memory: the `ChatMemory` and repository protocols and the message-window memory."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from sessionledger.domain.chat_window import checked_id, checked_messages, window
from sessionledger.domain.messages import Message
from sessionledger.infrastructure.agents.chat_repositories import (
    AsyncInMemoryChatMemoryRepository,
    InMemoryChatMemoryRepository,
)


@runtime_checkable
class ChatMemory(Protocol):
    """What a chat-memory advisor reads and writes; ids and messages are checked with Spring's texts."""

    def add(self, conversation_id: str, messages: Iterable[Message] | Message) -> None: ...

    def get(self, conversation_id: str) -> list[Message]: ...

    def clear(self, conversation_id: str) -> None: ...


@runtime_checkable
class ChatMemoryRepository(Protocol):
    """Where a chat memory keeps its messages (Spring's `ChatMemoryRepository`); `save_all` replaces."""

    def find_conversation_ids(self) -> list[str]: ...

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]: ...

    def save_all(self, conversation_id: str, messages: Iterable[Message]) -> None: ...

    def delete_by_conversation_id(self, conversation_id: str) -> None: ...


@runtime_checkable
class UpdatableChatMemoryRepository(ChatMemoryRepository, Protocol):
    """A repository that can also replace a conversation with a function of what it holds, as one
    step: `update(id, change)` saves `change(messages)` for the messages stored when it is saved,
    so a concurrent writer's messages are neither saved twice nor made to fail the update."""

    def update(self, conversation_id: str, change: Callable[[list[Message]], list[Message]]) -> None: ...


@runtime_checkable
class AsyncChatMemory(Protocol):
    """`ChatMemory` with coroutine methods, for the async chat-memory advisors."""

    async def add(self, conversation_id: str, messages: Iterable[Message] | Message) -> None: ...

    async def get(self, conversation_id: str) -> list[Message]: ...

    async def clear(self, conversation_id: str) -> None: ...


@runtime_checkable
class AsyncChatMemoryRepository(Protocol):
    """`ChatMemoryRepository` with coroutine methods."""

    async def find_conversation_ids(self) -> list[str]: ...

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]: ...

    async def save_all(self, conversation_id: str, messages: Iterable[Message]) -> None: ...

    async def delete_by_conversation_id(self, conversation_id: str) -> None: ...


@runtime_checkable
class AsyncUpdatableChatMemoryRepository(AsyncChatMemoryRepository, Protocol):
    """`UpdatableChatMemoryRepository` with coroutine methods."""

    async def update(
        self, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> None: ...


R = TypeVar("R", ChatMemoryRepository, AsyncChatMemoryRepository)


class _WindowRules(Generic[R]):
    """What both window memories hold and decide: the repository and `max_messages`, checked, and
    the window of a conversation with new messages (`domain.chat_window.window`)."""

    DEFAULT_MAX_MESSAGES = 20
    _DEFAULT_REPOSITORY: type[Any] = InMemoryChatMemoryRepository

    def __init__(self, repository: R | None = None, max_messages: int = DEFAULT_MAX_MESSAGES) -> None:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages <= 0:
            raise ValueError("maxMessages must be greater than 0")
        self._repository: R = self._DEFAULT_REPOSITORY() if repository is None else repository
        self._max_messages = max_messages

    @property
    def repository(self) -> R:
        return self._repository

    @property
    def max_messages(self) -> int:
        return self._max_messages

    @property
    def user_id(self) -> str | None:
        """The user the repository is bound to, if it is bound to one (the ledger's is)."""
        return getattr(self._repository, "user_id", None)

    def _windowed(self, new: list[Message]) -> Callable[[list[Message]], list[Message]]:
        return lambda memory: window(memory, new, self._max_messages)


class MessageWindowChatMemory(_WindowRules[ChatMemoryRepository]):
    """The newest `max_messages` messages of each conversation, cut at turn boundaries (Spring AI 2.0).

    Each `add` applies `domain.chat_window.window` to the conversation and the new messages: as one
    `update` on a repository that has it (both of ours), so that concurrent adds each store their
    messages once; else, as Spring AI does, with `find_by_conversation_id` then `save_all`. On a
    `LedgerChatMemoryRepository` what falls out of the window is archived in the ledger, not lost.
    `get` returns what is stored, with no trimming on read.
    """

    def add(self, conversation_id: str, messages: Iterable[Message] | Message) -> None:
        conversation_id = checked_id(conversation_id)
        new = checked_messages(messages)
        if isinstance(self._repository, UpdatableChatMemoryRepository):
            self._repository.update(conversation_id, self._windowed(new))
            return
        memory = self._repository.find_by_conversation_id(conversation_id)
        self._repository.save_all(conversation_id, self._windowed(new)(memory))

    def get(self, conversation_id: str) -> list[Message]:
        return self._repository.find_by_conversation_id(checked_id(conversation_id))

    def clear(self, conversation_id: str) -> None:
        self._repository.delete_by_conversation_id(checked_id(conversation_id))


class AsyncMessageWindowChatMemory(_WindowRules[AsyncChatMemoryRepository]):
    """`MessageWindowChatMemory` over an `AsyncChatMemoryRepository` (by default an
    `AsyncInMemoryChatMemoryRepository`): the same window and rules, every method a coroutine."""

    _DEFAULT_REPOSITORY = AsyncInMemoryChatMemoryRepository

    async def add(self, conversation_id: str, messages: Iterable[Message] | Message) -> None:
        conversation_id = checked_id(conversation_id)
        new = checked_messages(messages)
        if isinstance(self._repository, AsyncUpdatableChatMemoryRepository):
            await self._repository.update(conversation_id, self._windowed(new))
            return
        memory = await self._repository.find_by_conversation_id(conversation_id)
        await self._repository.save_all(conversation_id, self._windowed(new)(memory))

    async def get(self, conversation_id: str) -> list[Message]:
        return await self._repository.find_by_conversation_id(checked_id(conversation_id))

    async def clear(self, conversation_id: str) -> None:
        await self._repository.delete_by_conversation_id(checked_id(conversation_id))
