"""What an agent's code touches: chat memory, its repositories and advisors around one model call."""

from sessionledger.infrastructure.agents.chat_advisors import (
    MessageChatMemoryAdvisor,
    PromptChatMemoryAdvisor,
    VectorStore,
    VectorStoreChatMemoryAdvisor,
)
from sessionledger.infrastructure.agents.chat_memory import (
    ChatMemory,
    ChatMemoryRepository,
    MessageWindowChatMemory,
)
from sessionledger.infrastructure.agents.chat_repositories import (
    InMemoryChatMemoryRepository,
    LedgerChatMemoryRepository,
)

__all__ = [
    "ChatMemory",
    "ChatMemoryRepository",
    "InMemoryChatMemoryRepository",
    "LedgerChatMemoryRepository",
    "MessageChatMemoryAdvisor",
    "MessageWindowChatMemory",
    "PromptChatMemoryAdvisor",
    "VectorStore",
    "VectorStoreChatMemoryAdvisor",
]
