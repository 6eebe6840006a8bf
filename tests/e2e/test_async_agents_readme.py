"""The README's "Async agents" block, run as tests/e2e/test_readme.py runs every block (a fresh
process in an empty directory, no SESSIONLEDGER_* or OPENAI_* variable): the conversation it holds
with the offline model is stored, streamed reply included."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_readme import README, fenced_blocks, run_block


def test_the_async_agents_block_stores_both_turns(tmp_path: Path) -> None:
    ((line, code),) = [block for block in fenced_blocks(README, "python") if "AsyncMemoryChat(" in block[1]]
    done = run_block(line, code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "4 messages stored"
    assert "green tea" in done.stdout
