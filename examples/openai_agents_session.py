"""A two-turn openai-agents conversation whose history lives in the sessionledger ledger.

    python examples/openai_agents_session.py [--offline] [DATABASE_URL]      (default: memory://)

The model is OpenAI's chat-completions API through the `openai` client, which reads
`OPENAI_API_KEY` and `OPENAI_BASE_URL` itself: a real key, or any OpenAI-compatible server; with
--offline, the built-in offline model answers in-process. The one line that differs from the
SDK's own examples is the session's: `LedgerSession(...)` where they write `SQLiteSession(...)`.
Afterwards the example pops the last reply, as an agent undoing a turn would, and shows that the
ledger still holds it.
"""

from __future__ import annotations

import argparse
import asyncio

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from openai import AsyncOpenAI
from sessionledger.domain import EventFilter
from sessionledger.infrastructure.offline_model import Reply, add_offline_option, async_client_from_args
from sessionledger.infrastructure.openai_agents import LedgerSession
from sessionledger.workers.failures import run_or_explain

QUESTIONS = ("Hi, my name is Ada.", "What is my name?")
OFFLINE_SCRIPT = (Reply.text("Nice to meet you, Ada."), Reply.text("Your name is Ada."))
"""What the offline model answers, in order (`--offline`)."""


async def main(database_url: str, client: AsyncOpenAI) -> None:
    agent = Agent(
        name="assistant",
        instructions="Reply in one short sentence.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    )
    # was: session = SQLiteSession("example-conversation", "conversations.db")
    session = LedgerSession("example-conversation", database_url=database_url)
    try:
        for question in QUESTIONS:
            result = await Runner.run(
                agent, question, session=session, run_config=RunConfig(tracing_disabled=True)
            )
            print(f"user: {question}\nassistant: {result.final_output}")
        popped = await session.pop_item()
        print(f"popped: the {popped and popped.get('role')} item")
        window = await session.get_items()
        ledger = await session.service.get_events(session.session_id, EventFilter.all())
        archived = sum(event.archived for event in ledger)
        print(f"window: {len(window)} items; ledger: {len(ledger)} events, {archived} archived")
    finally:
        await session.close()
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database_url", nargs="?", default=argparse.SUPPRESS, help="default: memory://")
    parser.add_argument("--database-url", default="memory://", help="the same, as an option")
    add_offline_option(parser)
    options = parser.parse_args()
    client = async_client_from_args(options, OFFLINE_SCRIPT)
    run_or_explain(lambda: asyncio.run(main(options.database_url, client)))
