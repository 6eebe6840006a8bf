"""The README section "Async agents" proposed for issue 28 runs as written: its block, in a fresh
process in an empty directory with no SESSIONLEDGER_* or OPENAI_* variable set (as
tests/e2e/test_readme.py runs the README's blocks once it is pasted there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BLOCK = """\
import asyncio
from sessionledger import open_async_service
from sessionledger.domain import UserMessage
from sessionledger.infrastructure.agents import AsyncMemoryChat, AsyncRecallTools, AsyncSessionMemory
from sessionledger.infrastructure.offline_model import offline_async_client  # or openai.AsyncOpenAI()

async def main():
    async with open_async_service() as service:  # every ledger call runs off the event loop
        chat = AsyncMemoryChat(offline_async_client(), AsyncSessionMemory(service),
                               model="gpt-4o-mini", recall=AsyncRecallTools(service))
        reply = await chat.complete("trip-1", [UserMessage("I like green tea")], user_id="ada")
        print(reply.choices[0].message.content)
        stream = await chat.complete("trip-1", [UserMessage("What do I like?")], user_id="ada", stream=True)
        print("".join([c.choices[0].delta.content or "" async for c in stream if c.choices]))
        print(len(await service.get_messages("trip-1")), "messages stored")

asyncio.run(main())
"""


def test_the_async_agents_block_runs_as_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-c", BLOCK], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "4 messages stored"
    assert "green tea" in done.stdout
