"""Runs an example as a user would: as a script, against the fake OpenAI server (for the example tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.fake_openai import FakeOpenAI

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, fake_openai: FakeOpenAI, *args: str) -> str:
    """examples/`name`'s standard output; it must exit 0. It reaches the fake server through
    OPENAI_BASE_URL (as the openai client reads it), with no SESSIONLEDGER_/OPENAI_ setting of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    env.update(OPENAI_BASE_URL=fake_openai.base_url, OPENAI_API_KEY="test-key")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
