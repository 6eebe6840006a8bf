"""examples/openai_agents_session.py runs as its docstring says, offline against the fake server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.fake_openai import FakeOpenAI, Reply

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_agents_session.py"


def test_the_openai_agents_example_runs_against_the_fake_server(
    fake_openai: FakeOpenAI, sqlite_url: str
) -> None:
    fake_openai.enqueue(Reply.text("Nice to meet you, Ada."), Reply.text("Your name is Ada."))
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SESSIONLEDGER_", "OPENAI_"))
    }
    env.update(OPENAI_BASE_URL=fake_openai.base_url, OPENAI_API_KEY="test-key")
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), sqlite_url], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
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
