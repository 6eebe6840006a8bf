"""An openai-agents agent that recalls earlier conversations through `sessionledger mcp`.

    python examples/mcp_agent.py [--offline] [--database-url URL]      (default: a temporary SQLite file)

The ledger holds two of Ada's earlier conversations and one of Bob's. The agent has no tools of its
own: openai-agents' `MCPServerStdio` starts `sessionledger mcp --user ada` and lists its recall
tools, so any MCP client (Claude Desktop, an IDE, another framework) could stand where the agent
does. The server answers for Ada alone; Bob's conversation is out of reach whatever the model asks.
The model is OpenAI's chat-completions API through the `openai` client (`OPENAI_API_KEY`,
`OPENAI_BASE_URL`); with --offline, the built-in offline model answers in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from agents.items import ToolCallOutputItem
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.offline_model import (
    Reply,
    add_offline_option,
    async_client_from_args,
    tool_call,
)
from sessionledger.workers.failures import run_or_explain

QUESTION = "Which city was I planning to visit, and when?"
OFFLINE_SCRIPT = (
    Reply.calling(tool_call("cross_session_search", {"query": "visit,trip"})),
    Reply.text("You were planning to visit Kyoto in April, for the cherry blossoms."),
)
"""What the offline model answers, in order (`--offline`): a recall call, then the answer."""


def remember(database_url: str) -> None:
    """Earlier conversations: Ada's trip and her cooking question, and Bob's own trip."""
    with open_service(database_url) as service:
        for user, session_id, said, answered in (
            ("ada", "trip", "I want to visit Kyoto in April.", "Kyoto in April: cherry blossom season."),
            ("ada", "cooking", "How long do I boil an egg?", "About seven minutes."),
            ("bob", "bob-trip", "I plan a trip to Reykjavik.", "Reykjavik is lovely in June."),
        ):
            service.create_session(user, session_id=session_id)
            service.append_message(session_id, UserMessage(said))
            service.append_message(session_id, AssistantMessage(answered))


async def main(database_url: str, client: AsyncOpenAI) -> None:
    recall = MCPServerStdio(
        # a deployment writes {"command": "sessionledger", "args": ["mcp", "--user", ...]}; this
        # example runs the interpreter it was started with
        params={
            "command": sys.executable,
            "args": ["-m", "sessionledger", "mcp", "--user", "ada", "--database-url", database_url],
        },
        name="sessionledger",
        client_session_timeout_seconds=30,
    )
    try:
        async with recall:
            agent = Agent(
                name="assistant",
                instructions="Search the user's earlier conversations before you answer.",
                model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
                mcp_servers=[recall],
            )
            print("tools:", ", ".join(sorted(tool.name for tool in await recall.list_tools())))
            result = await Runner.run(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))
            for item in result.new_items:
                if isinstance(item, ToolCallOutputItem):  # an MCP tool's output is its text content
                    output = item.output
                    print("recalled:", output["text"] if isinstance(output, dict) else output)
            print(f"user: {QUESTION}\nagent: {result.final_output}")
    finally:
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a ledger the server process can open (not memory://)")
    add_offline_option(parser)
    options = parser.parse_args()
    model_client = async_client_from_args(options, OFFLINE_SCRIPT)
    with tempfile.TemporaryDirectory() as scratch:
        url = options.database_url or f"sqlite:///{Path(scratch) / 'ledger.db'}"
        run_or_explain(lambda: remember(url))
        run_or_explain(lambda: asyncio.run(main(url, model_client)))
