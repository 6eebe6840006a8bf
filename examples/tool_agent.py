"""A tool-calling agent with session memory and recall, over the ledger.

The agent has one tool of its own (a calculator, answered here) and the two recall tools (answered
by MemoryChat in its loop). After a few turns the session is compacted, so the first turn leaves
the window; the agent can still find it with conversation_search, because the ledger keeps it.

Runs against any OpenAI-compatible endpoint: the openai client reads OPENAI_BASE_URL and
OPENAI_API_KEY (a real key with no base URL talks to OpenAI itself). With --offline, the built-in
offline model answers in-process, scripted to call multiply and then conversation_search.

    python examples/tool_agent.py [--offline] [--database-url URL] [--model NAME] [--user USER]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from sessionledger.domain import SystemMessage, ToolResponse, ToolResponseMessage, UserMessage
from sessionledger.domain.compaction import SlidingWindowStrategy, TurnCountTrigger
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.agents import MemoryChat, RecallTools, SessionMemory
from sessionledger.infrastructure.offline_model import Reply, add_offline_option, client_from_args, tool_call
from sessionledger.workers.failures import run_or_explain

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
SYSTEM = SystemMessage(
    "You are a helpful assistant. Use multiply for arithmetic. Older parts of this conversation may "
    "be out of view: use conversation_search to look them up."
)
OFFLINE_SCRIPT = (
    Reply.text("Noted: your favourite colour is teal."),
    Reply.calling(tool_call("multiply", {"a": 6, "b": 7})),
    Reply.text("6 times 7 is 42."),
    Reply.calling(
        tool_call(
            "conversation_search", {"innerThought": "It was said before the window.", "query": "colour"}
        )
    ),
    Reply.text("Your favourite colour is teal."),
)
"""What the offline model answers, in order (`--offline`)."""


def multiply(arguments: str) -> str:
    """The agent's own tool; a bad call is answered with an error the model can read."""
    try:
        args = json.loads(arguments)
        return str(float(args["a"]) * float(args["b"]))
    except (ValueError, KeyError, TypeError) as error:
        return f"Error: {error}"


def ask(chat: MemoryChat, session_id: str, user: str, text: str) -> str:
    """One user turn, answering the agent's own tool calls until it replies in text."""
    messages = [SYSTEM, UserMessage(text)]
    while True:
        completion = chat.complete(session_id, messages, user_id=user, tools=[CALCULATOR])
        reply = completion.choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        results = [
            ToolResponse(call.id, call.function.name, multiply(call.function.arguments))
            for call in reply.tool_calls
        ]
        messages = [SYSTEM, ToolResponseMessage(results)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a SQLite file in a new temporary directory")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--user", default="alice")
    add_offline_option(parser)
    options = parser.parse_args()
    client = client_from_args(options, OFFLINE_SCRIPT)
    database_url = options.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'agent.db'}"

    with open_service(database_url) as service, client:
        memory = SessionMemory(service)
        chat = MemoryChat(client, memory, model=options.model, recall=RecallTools(service))
        session_id = service.create_session(options.user).id
        for text in ("My favourite colour is teal.", "What is 6 times 7?"):
            print(f"user: {text}\nagent: {ask(chat, session_id, options.user, text)}")
        compacted = service.compact(session_id, TurnCountTrigger(1), SlidingWindowStrategy(max_events=2))
        print(f"(compacted: {compacted.events_removed} events left the window, none left the ledger)")
        question = "What is my favourite colour?"
        print(f"user: {question}\nagent: {ask(chat, session_id, options.user, question)}")
        print(f"\nsession {session_id} in {database_url}:")
        for event in service.get_events(session_id):
            flag = "archived" if event.archived else "window"
            calls = ", ".join(f"{c.name}({c.arguments})" for c in event.message.tool_calls)
            results = ", ".join(r.content[:60] for r in event.message.tool_responses)
            print(f"  [{flag}] {event.type.value}: {event.message.text or calls or results}")


if __name__ == "__main__":
    run_or_explain(main)
