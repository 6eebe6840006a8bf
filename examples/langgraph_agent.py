"""A tool-calling LangGraph agent whose checkpointer is the ledger: `checkpointer=LedgerSaver(url)`.

The graph is LangGraph's usual agent loop (a model node, a tool node, back to the model until it
answers in text) over `MessagesState`. Each of its checkpoints and pending writes is a ledger
record on the thread's hash chain, and its messages are also the session's events, each stored
once: `get_events`, search, recall and the workers see the conversation like any other, and a
second question on the same thread resumes from the last checkpoint. The recall tools
(`RecallTools.as_langchain_tools`) are bound beside the agent's own: the model can search what
compaction took out of its window.

Runs against any OpenAI-compatible endpoint: the openai client reads OPENAI_BASE_URL and
OPENAI_API_KEY (a real key with no base URL talks to OpenAI itself). With --offline, the built-in
offline model answers in-process, scripted to call multiply and then to answer.

    python examples/langgraph_agent.py [--offline] [--database-url URL] [--model NAME] [--user USER]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import openai
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.agents import RecallTools
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.langgraph import LedgerSaver
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
SYSTEM = SystemMessage("You are a helpful assistant. Use multiply for arithmetic.")
OFFLINE_SCRIPT = (
    Reply.calling(tool_call("multiply", {"a": 6, "b": 7})),
    Reply.text("6 times 7 is 42."),
    Reply.calling(tool_call("conversation_search", {"innerThought": "look back", "query": "times"})),
    Reply.text("You asked me what 6 times 7 is: 42."),
)
"""What the offline model answers, in order (`--offline`)."""


def multiply(arguments: dict[str, Any]) -> str:
    """The agent's tool; a bad call is answered with an error the model can read."""
    try:
        return str(float(arguments["a"]) * float(arguments["b"]))
    except (ValueError, KeyError, TypeError) as error:
        return f"Error: {error}"


def agent_graph(client: openai.OpenAI, model: str, saver: LedgerSaver, recall: list[BaseTool]) -> Any:
    """The agent loop, compiled with the ledger as its checkpointer; `recall` are the recall tools
    of the thread's session, answered beside `multiply`."""
    tools = {tool.name: tool for tool in recall}
    schemas = [CALCULATOR, *(convert_to_openai_tool(tool) for tool in recall)]

    def call_model(state: MessagesState) -> dict[str, Any]:
        messages = convert_to_openai_messages([SYSTEM, *state["messages"]])
        reply = client.chat.completions.create(model=model, messages=messages, tools=schemas)
        message = reply.choices[0].message
        calls = [
            {"id": call.id, "name": call.function.name, "args": json.loads(call.function.arguments)}
            for call in message.tool_calls or []
            if call.type == "function"
        ]
        return {"messages": [AIMessage(message.content or "", tool_calls=calls)]}

    def call_tools(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(
                    multiply(call["args"])
                    if call["name"] == "multiply"
                    else str(tools[call["name"]].invoke(call["args"])),
                    tool_call_id=call["id"],
                    name=call["name"],
                )
                for call in last.tool_calls
            ]
        }

    def next_step(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", call_tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", next_step, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a SQLite file in a new temporary directory")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--user", default="alice")
    add_offline_option(parser)
    options = parser.parse_args()
    client = client_from_args(options, OFFLINE_SCRIPT)
    database_url = options.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'agent.db'}"

    with LedgerSaver(database_url, user_id=options.user) as saver, client:
        thread_id = f"thread-{uuid.uuid4().hex[:12]}"
        recall = RecallTools(saver.service).as_langchain_tools(thread_id, user_id=options.user)
        graph = agent_graph(client, options.model, saver, recall)
        config = {"configurable": {"thread_id": thread_id}}
        for text in ("What is 6 times 7?", "What did I just ask you?"):
            result = graph.invoke({"messages": [HumanMessage(text)]}, config)
            print(f"user: {text}\nagent: {result['messages'][-1].content}")

        service = saver.service  # the thread is a ledger session
        events = service.get_events(thread_id, user_id=options.user)
        records = service.records(thread_id, user_id=options.user)
        entries = Counter(record.event_type for record in records if record.kind is Kind.ENTRY)
        print(f"\nthread {thread_id} in {database_url}:")
        print(
            f"on its hash chain: {entries['langgraph.checkpoint']} checkpoints, "
            f"{entries['langgraph.write']} pending writes, {entries['langgraph.message']} messages "
            f"(each written once); the session's messages: {len(events)}"
        )
        for event in events:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in event.message.tool_calls)
            results = ", ".join(r.content for r in event.message.tool_responses)
            print(f"  {event.type.value}: {event.message.text or calls or results}")
        print(f"hash chain verified: {verify(service, thread_id).ok}")


if __name__ == "__main__":
    run_or_explain(main)
