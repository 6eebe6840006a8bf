"""A Spring-AI-Chat-Memory-style chatbot over the ledger: a message window for the recent turns and
a vector store for long-term recall, around one model call per turn.

The window (MessageWindowChatMemory on a LedgerChatMemoryRepository) holds the last few messages;
what falls out of it is archived in the ledger, never destroyed. The vector store remembers every
user and assistant message, so a fact from a turn that left the window still reaches the model
(as a <memory-entry> in its system message). The vector store follows the database: brute force
for memory://, sqlite-vec beside a SQLite ledger, pgvector on PostgreSQL (the server needs the
extension; without it, the example says how to get it and exits). The embeddings come from the
same OpenAI-compatible endpoint as the chat.

Runs against any OpenAI-compatible endpoint: the openai client reads OPENAI_BASE_URL and
OPENAI_API_KEY (a real key with no base URL talks to OpenAI itself); with --offline, against the
built-in offline model (scripted replies, hashed bag-of-words embeddings). Without --interactive it
plays a short scripted conversation; with it, it reads your lines until end of input.

    python examples/chatbot.py [--offline] [--database-url URL] [--model NAME] [--embedding-model NAME]
                               [--user USER] [--window N] [--interactive]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from sessionledger.domain import SystemMessage, UserMessage
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.agents import (
    LedgerChatMemoryRepository,
    MemoryChat,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    VectorStore,
    VectorStoreChatMemoryAdvisor,
)
from sessionledger.infrastructure.offline_model import Reply, add_offline_option, client_from_args
from sessionledger.infrastructure.vectors import (
    InMemoryVectorStore,
    OpenAIEmbeddings,
    PgVectorStore,
    SqliteVecStore,
)
from sessionledger.workers.failures import run_or_explain

SYSTEM = SystemMessage("You are a friendly assistant. Keep answers short.")
SCRIPT = (
    "Hi, I am Ada and I keep bees on my roof.",
    "Which flowers should I plant for them?",
    "How often should I check the hive?",
    "Remind me: what animals do I keep?",
)
OFFLINE_SCRIPT = (
    Reply.text("Hello Ada! Rooftop bees, how wonderful."),
    Reply.text("Lavender, clover, borage and sunflowers."),
    Reply.text("Every week or two in the warm months."),
    Reply.text("You keep bees, on your roof."),
)
"""What the offline model answers to SCRIPT, in order (`--offline`); other lines get derived replies."""


def vector_store(database_url: str, embeddings: OpenAIEmbeddings) -> VectorStore:
    """The long-term store that goes with the ledger's database."""
    if database_url.startswith("memory://"):
        return InMemoryVectorStore(embeddings)
    if database_url.startswith("sqlite:///"):
        ledger = Path(database_url.removeprefix("sqlite:///"))
        return SqliteVecStore(ledger.with_name(ledger.stem + ".vectors.db"), embeddings)
    return PgVectorStore(database_url, embeddings)


def lines(interactive: bool) -> Iterable[str]:
    if not interactive:
        yield from SCRIPT
        return
    for line in sys.stdin:
        if line.strip():
            yield line.strip()


def report(service: SessionService, memory: MessageWindowChatMemory, conversation: str, user: str) -> None:
    events = service.get_events(conversation, user_id=user)
    archived = sum(1 for event in events if event.archived)
    print(f"\nwindow: {len(memory.get(conversation))} messages; ledger: {len(events)} ({archived} archived)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a SQLite file in a new temporary directory")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--embedding-model", default="text-embedding-3-small")
    parser.add_argument("--user", default="ada")
    parser.add_argument("--window", type=int, default=4, help="messages the chat memory keeps")
    parser.add_argument("--interactive", action="store_true", help="read your lines from standard input")
    add_offline_option(parser)
    options = parser.parse_args()
    client = client_from_args(options, () if options.interactive else OFFLINE_SCRIPT)
    database_url = options.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'chatbot.db'}"
    store = vector_store(database_url, OpenAIEmbeddings(client, model=options.embedding_model))

    with open_service(database_url) as service, client:
        repository = LedgerChatMemoryRepository(service, user_id=options.user)
        memory = MessageWindowChatMemory(repository, max_messages=options.window)
        chat = MemoryChat(
            client,
            MessageChatMemoryAdvisor(memory),
            VectorStoreChatMemoryAdvisor(store, top_k=4),
            model=options.model,
        )
        conversation = f"chat-{options.user}"
        for text in lines(options.interactive):
            print(f"you: {text}")
            completion = chat.complete(conversation, [SYSTEM, UserMessage(text)], user_id=options.user)
            print(f"bot: {completion.choices[0].message.content or ''}")
        report(service, memory, conversation, options.user)
        print(f"database: {database_url}")


if __name__ == "__main__":
    run_or_explain(main)
