"""Sentinel-style fact injection: the latest summary goes into the system prompt as a fact block.

SessionMemory with history="facts" leaves the summary pair out of the history and puts the summary
into the system message (Sentinel's <knowledge> block); a trigger and a recursive-summarization
strategy compact the session in after(), synchronously, with the same model as the summarizer.

Runs against any OpenAI-compatible endpoint (OPENAI_BASE_URL / OPENAI_API_KEY, read by the client),
or with --offline against the built-in offline model, scripted (the summary included).

    python examples/sentinel_facts.py [--offline] [--database-url URL] [--model NAME]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sessionledger.domain import EventFilter, Message, SystemMessage, UserMessage
from sessionledger.domain.compaction import RecursiveSummarizationStrategy, TurnCountTrigger
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.agents import MemoryChat, SessionMemory
from sessionledger.infrastructure.offline_model import Reply, add_offline_option, client_from_args
from sessionledger.infrastructure.summarizers import OpenAISummarizer
from sessionledger.workers.failures import run_or_explain

QUESTIONS = (
    "I'm planning a trip to Japan in April.",
    "I want to see the cherry blossoms in Kyoto.",
    "My budget is 3000 euros.",
    "What should I pack?",
)
OFFLINE_SCRIPT = (
    Reply.text("Lovely: April is cherry blossom season."),
    Reply.text("Kyoto in early April is perfect for the blossoms."),
    Reply.text("3000 euros is enough for two weeks if you travel by rail."),
    # the third turn's after() compacts: the summarizer's call comes next
    Reply.text("The traveller plans Japan in April to see Kyoto's cherry blossoms, on a 3000 euro budget."),
    Reply.text("Pack layers, comfortable walking shoes and a light rain jacket."),
)
"""What the offline model answers, in order (`--offline`)."""


class ShowSystemPrompt:
    """An advisor of our own, after the memory: prints the system prompt the model will see."""

    def before(
        self,
        conversation_id: str,
        messages: list[Message],
        *,
        user_id: str | None = None,
        event_filter: EventFilter | None = None,
    ) -> list[Message]:
        print(f"-- the model's system prompt:\n{messages[0].text}\n")
        return messages

    def after(self, conversation_id: str, replies: list[Message], *, user_id: str | None = None) -> None:
        print(f"-- reply: {replies[-1].text}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a SQLite file in a new temporary directory")
    parser.add_argument("--model", default="gpt-4o-mini")
    add_offline_option(parser)
    options = parser.parse_args()
    client = client_from_args(options, OFFLINE_SCRIPT)
    database_url = options.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'facts.db'}"

    with open_service(database_url) as service, client:
        summarizer = OpenAISummarizer(options.model, client=client)
        memory = SessionMemory(
            service,
            history="facts",
            trigger=TurnCountTrigger(2),
            strategy=RecursiveSummarizationStrategy(summarizer, max_events_to_keep=2, overlap_size=0),
        )
        chat = MemoryChat(client, memory, ShowSystemPrompt(), model=options.model)
        session_id = service.create_session("traveller").id
        for question in QUESTIONS:
            print(f"user: {question}")
            chat.complete(session_id, [SystemMessage("You are a travel assistant."), UserMessage(question)])
        print(f"session {session_id} in {database_url}")


if __name__ == "__main__":
    run_or_explain(main)
