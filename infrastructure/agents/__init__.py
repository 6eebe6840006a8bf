"""What an agent's code touches: memory advisors, recall tools and a chat loop over the ledger."""

from sessionledger.infrastructure.agents.advisor import Advisor
from sessionledger.infrastructure.agents.memory_chat import MemoryChat
from sessionledger.infrastructure.agents.recall import RecallTools
from sessionledger.infrastructure.agents.session_memory import (
    SessionMemory,
    idempotent_event_id,
    skip_empty_messages,
)

__all__ = [
    "Advisor",
    "MemoryChat",
    "RecallTools",
    "SessionMemory",
    "idempotent_event_id",
    "skip_empty_messages",
]
