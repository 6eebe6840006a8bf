"""What an agent's code touches: memory advisors, recall tools, a chat loop over the ledger, and
Spring AI's chat memory with its repositories and advisors."""

from sessionledger.infrastructure.agents.advisor import Advisor
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
    UpdatableChatMemoryRepository,
)
from sessionledger.infrastructure.agents.chat_repositories import (
    InMemoryChatMemoryRepository,
    LedgerChatMemoryRepository,
)
from sessionledger.infrastructure.agents.memory_chat import MemoryChat
from sessionledger.infrastructure.agents.recall import RecallTools
from sessionledger.infrastructure.agents.session_memory import (
    SessionMemory,
    idempotent_event_id,
    skip_empty_messages,
)

__all__ = [
    "Advisor",
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
