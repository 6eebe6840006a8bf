"""examples/openai_agents_session.py runs as its docstring says, offline against the fake server."""

from __future__ import annotations

from tests.e2e.example_scripts import run_example
from tests.fakes.fake_openai import FakeOpenAI, Reply


def test_the_openai_agents_example_runs_against_the_fake_server(
    fake_openai: FakeOpenAI, sqlite_url: str
) -> None:
    fake_openai.enqueue(Reply.text("Nice to meet you, Ada."), Reply.text("Your name is Ada."))
    out = run_example("openai_agents_session.py", fake_openai, sqlite_url)
    assert out.splitlines() == [
        "user: Hi, my name is Ada.",
        "assistant: Nice to meet you, Ada.",
        "user: What is my name?",
        "assistant: Your name is Ada.",
        "popped: the assistant item",
        "window: 3 items; ledger: 4 events, 1 archived",
    ]
    assert len(fake_openai.requests) == 2
    assert [m["role"] for m in fake_openai.requests[1].body["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]
