"""The agent examples run as scripts against the fake OpenAI server (OPENAI_BASE_URL, as the openai
client reads it) on a SQLite file, and store what they say they store."""

from __future__ import annotations

import json

import pytest
from sessionledger.domain import EventFilter, MessageType, SessionEvent
from sessionledger.domain.memory import remove_unpaired_tool_calls
from sessionledger.infrastructure import open_service

from tests.e2e.example_scripts import run_example
from tests.fakes.fake_openai import Reply


@pytest.fixture
def database_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'example.db'}"


def only_session(database_url: str, user: str) -> tuple[list[SessionEvent], str]:
    with open_service(database_url) as service:
        (session,) = service.list_sessions(user)
        return service.get_events(session.id, EventFilter.all()), session.id


def test_tool_agent_answers_its_tool_and_recalls_an_archived_turn(fake_openai, database_url):
    fake_openai.enqueue(
        Reply.text("Noted: teal."),
        Reply.calling(("call_m", "multiply", '{"a": 6, "b": 7}')),
        Reply.text("6 times 7 is 42."),
        Reply.calling(("call_s", "conversation_search", '{"innerThought": "look it up", "query": "colour"}')),
        Reply.text("Your favourite colour is teal."),
    )
    out = run_example("tool_agent.py", fake_openai, "--database-url", database_url)
    assert "agent: Your favourite colour is teal." in out
    events, _ = only_session(database_url, "alice")
    assert remove_unpaired_tool_calls(events) == events
    results = {r.id: r.content for e in events for r in e.message.tool_responses}
    assert results["call_m"] == "42.0"
    recalled = json.loads(results["call_s"])
    assert {"type": "user", "text": "My favourite colour is teal."}.items() <= recalled[0].items()
    teal = next(e for e in events if e.message.text == "My favourite colour is teal.")
    assert teal.archived  # out of the window, found in the ledger
    assert fake_openai.requests[3].body["tools"][0]["function"]["name"] == "multiply"


def test_sentinel_facts_injects_the_summary_into_the_system_prompt(fake_openai, database_url):
    fake_openai.enqueue(
        Reply.text("Lovely."),
        Reply.text("Kyoto in April is perfect."),
        Reply.text("3000 euros is enough."),
        Reply.text("The traveller plans Japan in April, Kyoto blossoms, 3000 EUR budget."),  # the summary
        Reply.text("Pack layers and comfortable shoes."),
    )
    out = run_example("sentinel_facts.py", fake_openai, "--database-url", database_url)
    assert "Pack layers" in out
    events, session_id = only_session(database_url, "traveller")
    synthetic = [e for e in events if e.is_synthetic]
    assert [e.type for e in synthetic] == [MessageType.USER, MessageType.ASSISTANT]
    last_prompt = fake_openai.requests[-1].body["messages"]
    system = last_prompt[0]
    assert system["role"] == "system" and system["content"].startswith("You are a travel assistant.")
    assert "Use the following knowledge and facts" in system["content"]
    assert f"Information about session {session_id}" in system["content"]
    assert "3000 EUR budget" in system["content"]
    # the summary pair is in the fact block, not in the history
    assert all("3000 EUR budget" not in (m.get("content") or "") for m in last_prompt[1:])


def test_multi_agent_keeps_the_researchers_events_on_its_branch_out_of_the_orchestrators_view(
    fake_openai, database_url
):
    fake_openai.enqueue(
        Reply.calling(("call_r", "research", '{"topic": "green tea"}')),
        Reply.text("Green tea is unoxidised; it has catechins."),
        Reply.text("Green tea is unoxidised and rich in catechins."),
    )
    out = run_example("multi_agent_branches.py", fake_openai, "--database-url", database_url)
    assert "orchestrator: Green tea is unoxidised and rich in catechins." in out
    events, _ = only_session(database_url, "editor")
    assert [(e.branch, e.type) for e in events if e.branch == "orch.researcher"] == [
        ("orch.researcher", MessageType.USER),
        ("orch.researcher", MessageType.ASSISTANT),
    ]
    assert {e.branch for e in events} == {"orch", "orch.researcher"}
    researcher_prompt = fake_openai.requests[1].body["messages"]
    assert not any(m.get("tool_calls") for m in researcher_prompt)  # the pending call is left out
    final_prompt = fake_openai.requests[2].body["messages"]
    assert not any("Research: green tea" in (m.get("content") or "") for m in final_prompt)
    assert final_prompt[-1] == {
        "role": "tool",
        "tool_call_id": "call_r",
        "content": "Green tea is unoxidised; it has catechins.",
    }
