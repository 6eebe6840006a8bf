"""Two agents, one session: a sub-agent's events on its own branch, out of the orchestrator's view.

The orchestrator delegates with a `research` tool; the researcher runs as a second MemoryChat whose
SessionMemory writes on branch "orch.researcher". Branch reads are ADK's: a branch sees the root,
its ancestors and itself, so the researcher sees the orchestrator's conversation, while the
orchestrator (branch "orch") never sees the researcher's own back and forth, only the result it
hands back as the tool's answer. The ledger keeps both. The researcher's history leaves out the
orchestrator's tool call that is waiting for it (Sentinel's unpaired-call selector), since a model
refuses a call without its result.

Runs against any OpenAI-compatible endpoint (OPENAI_BASE_URL / OPENAI_API_KEY, read by the client),
or with --offline against the built-in offline model, scripted to delegate once.

    python examples/multi_agent_branches.py [--offline] [--database-url URL] [--model NAME]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from sessionledger.domain import EventFilter, SystemMessage, ToolResponse, ToolResponseMessage, UserMessage
from sessionledger.domain.memory import remove_unpaired_tool_calls
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.agents import MemoryChat, SessionMemory
from sessionledger.infrastructure.offline_model import Reply, add_offline_option, client_from_args, tool_call
from sessionledger.workers.failures import run_or_explain

ORCHESTRATOR, RESEARCHER = "orch", "orch.researcher"
RESEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "research",
        "description": "Ask the research sub-agent about a topic; returns its findings.",
        "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
    },
}
OFFLINE_SCRIPT = (
    Reply.calling(tool_call("research", {"topic": "green tea"})),  # the orchestrator delegates
    Reply.text("Green tea is unoxidised; it is rich in catechins and has less caffeine than coffee."),
    Reply.text("Green tea is made from unoxidised leaves. It is rich in catechins and gentler on caffeine."),
)
"""What the offline model answers, in order (`--offline`): orchestrator, researcher, orchestrator."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a SQLite file in a new temporary directory")
    parser.add_argument("--model", default="gpt-4o-mini")
    add_offline_option(parser)
    options = parser.parse_args()
    client = client_from_args(options, OFFLINE_SCRIPT)
    database_url = options.database_url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'agents.db'}"

    with open_service(database_url) as service, client:
        orchestrator = MemoryChat(client, SessionMemory(service, branch=ORCHESTRATOR), model=options.model)
        # the researcher reads the orchestrator's pending tool call too: leave it out until answered
        researcher_memory = SessionMemory(
            service, branch=RESEARCHER, history_selector=remove_unpaired_tool_calls
        )
        researcher = MemoryChat(client, researcher_memory, model=options.model)
        user = "editor"
        session_id = service.create_session(user).id
        system = SystemMessage("You write short briefs. Use the research tool for facts.")
        messages = [system, UserMessage("Write a two-sentence brief on green tea.")]
        while True:
            reply = orchestrator.complete(session_id, messages, user_id=user, tools=[RESEARCH_TOOL])
            answer = reply.choices[0].message
            if not answer.tool_calls:
                print(f"orchestrator: {answer.content}")
                break
            results = []
            for call in answer.tool_calls:
                topic = json.loads(call.function.arguments or "{}").get("topic", "")
                found = researcher.complete(
                    session_id,
                    [
                        SystemMessage("You are a researcher. Answer with facts."),
                        UserMessage(f"Research: {topic}"),
                    ],
                    user_id=user,
                )
                findings = found.choices[0].message.content or ""
                print(f"researcher ({topic}): {findings}")
                results.append(ToolResponse(call.id, call.function.name, findings))
            messages = [system, ToolResponseMessage(results)]

        seen = service.get_events(
            session_id, EventFilter.for_branch(ORCHESTRATOR).merge(EventFilter.active())
        )
        print(f"\nsession {session_id} in {database_url}")
        total = len(service.get_events(session_id))
        print(f"the ledger holds {total} events; the orchestrator sees {len(seen)}:")
        for event in service.get_events(session_id):
            print(f"  [{event.branch}] {event.type.value}: {(event.message.text or '')[:70]}")


if __name__ == "__main__":
    run_or_explain(main)
