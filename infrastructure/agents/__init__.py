"""What an agent's code touches: memory advisors, recall tools, a chat loop over the ledger, and
Spring AI's chat memory with its repositories and advisors; each with an `Async` twin on
`AsyncSessionService` and `openai.AsyncOpenAI`, the same rules behind both."""

from sessionledger.infrastructure.agents.advisor import Advisor, AsyncAdvisor
from sessionledger.infrastructure.agents.chat_advisors import (
    AsyncMessageChatMemoryAdvisor,
    AsyncPromptChatMemoryAdvisor,
    MessageChatMemoryAdvisor,
    PromptChatMemoryAdvisor,
    VectorStore,
    VectorStoreChatMemoryAdvisor,
)
from sessionledger.infrastructure.agents.chat_memory import (
    AsyncChatMemory,
    AsyncChatMemoryRepository,
    AsyncMessageWindowChatMemory,
    AsyncUpdatableChatMemoryRepository,
    ChatMemory,
    ChatMemoryRepository,
    MessageWindowChatMemory,
    UpdatableChatMemoryRepository,
)
from sessionledger.infrastructure.agents.chat_repositories import (
    AsyncInMemoryChatMemoryRepository,
    AsyncLedgerChatMemoryRepository,
    InMemoryChatMemoryRepository,
    LedgerChatMemoryRepository,
)
from sessionledger.infrastructure.agents.memory_chat import AsyncMemoryChat, MemoryChat
from sessionledger.infrastructure.agents.recall import AsyncRecallTools, RecallTools
from sessionledger.infrastructure.agents.session_memory import (
    AsyncSessionMemory,
    SessionMemory,
    idempotent_event_id,
    skip_empty_messages,
)

__all__ = [
    "Advisor",
    "AsyncAdvisor",
    "AsyncChatMemory",
    "AsyncChatMemoryRepository",
    "AsyncInMemoryChatMemoryRepository",
    "AsyncLedgerChatMemoryRepository",
    "AsyncMemoryChat",
    "AsyncMessageChatMemoryAdvisor",
    "AsyncMessageWindowChatMemory",
    "AsyncPromptChatMemoryAdvisor",
    "AsyncRecallTools",
    "AsyncSessionMemory",
    "AsyncUpdatableChatMemoryRepository",
    "ChatMemory",
    "ChatMemoryRepository",
    "InMemoryChatMemoryRepository",
    "LedgerChatMemoryRepository",
    "MemoryChat",
    "MessageChatMemoryAdvisor",
    "MessageWindowChatMemory",
    "PromptChatMemoryAdvisor",
    "RecallTools",
    "SessionMemory",
    "UpdatableChatMemoryRepository",
    "VectorStore",
    "VectorStoreChatMemoryAdvisor",
    "idempotent_event_id",
    "skip_empty_messages",
]
