"""Every example runs offline (`make examples`, the target itself), and without a key or `--offline`
says so in one line; chatbot.py on a PostgreSQL without pgvector says what is missing in one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from sessionledger.infrastructure.offline_model import NO_KEY_MESSAGE

ROOT = Path(__file__).resolve().parents[2]
NEED_A_MODEL = [
    "tool_agent",
    "sentinel_facts",
    "multi_agent_branches",
    "chatbot",
    "openai_agents_session",
    "langgraph_agent",
    "mcp_agent",
]


def without_openai_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SESSIONLEDGER_"))}


def makefile_examples() -> list[str]:
    (names,) = re.findall(r"^EXAMPLES := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    return names.split()


def test_the_makefile_lists_every_example():
    assert sorted(makefile_examples()) == sorted(p.stem for p in (ROOT / "examples").glob("[!_]*.py"))


@pytest.mark.slow
def test_make_examples_runs_every_example_offline_and_leaves_no_file(tmp_path):
    before = sorted(p.relative_to(ROOT) for p in ROOT.rglob("*") if ".venv" not in p.parts)
    venv = Path(sys.executable).parents[1]
    done = subprocess.run(
        # the installed virtualenv as it is (-o: not rebuilt), temporary files under tmp_path
        ["make", "--no-print-directory", "-o", f"{venv}/bin/sessionledger", "examples", f"VENV={venv}"],
        cwd=ROOT,
        env={**without_openai_settings(), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.findall(r"^== examples/(\w+)\.py --offline$", out, re.MULTILINE) == makefile_examples()
    for line in [
        "agent: Your favourite colour is teal.",  # tool_agent: multiply, then conversation_search
        "  [archived] tool: 42.0",
        "<content>The traveller plans Japan in April to see Kyoto's cherry blossoms, on a 3000 euro "
        "budget.</content>",  # sentinel_facts: the summary in the system prompt
        "the ledger holds 6 events; the orchestrator sees 4:",  # multi_agent_branches
        "window: 4 messages; ledger: 8 (4 archived)",  # chatbot
        "window: 3 items; ledger: 4 events, 1 archived",  # openai_agents_session
        "hash chain verified: True",  # adk_agent
        "agent: You asked me what 6 times 7 is: 42.",  # langgraph_agent: resumed from its checkpoint
        "on its hash chain: 10 checkpoints, 14 pending writes, 8 messages (each written once); "
        "the session's messages: 8",
        '  assistant: conversation_search({"innerThought": "look back", "query": "times"})',  # recall bound
        # mcp_agent: the recall tool served by `sessionledger mcp --user ada`, which reaches no other user
        'recalled: [{"sessionId":"trip",',
        "agent: You were planning to visit Kyoto in April, for the cherry blossoms.",
    ]:
        assert line in out, line
    assert "Traceback" not in done.stderr
    assert "Reykjavik" not in out  # mcp_agent: Bob's trip, which Ada's recall server cannot reach
    assert list(tmp_path.iterdir()) == []  # the temporary directory is gone
    assert sorted(p.relative_to(ROOT) for p in ROOT.rglob("*") if ".venv" not in p.parts) == before


@pytest.mark.parametrize("name", NEED_A_MODEL)
def test_without_a_key_or_offline_an_example_says_so_in_one_line(name, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / f"{name}.py"),
            "--database-url",
            f"sqlite:///{tmp_path}/x.db",
        ],
        cwd=tmp_path,
        env=without_openai_settings(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", NO_KEY_MESSAGE + "\n")
    assert list(tmp_path.iterdir()) == []  # it stopped before making anything


def has_pgvector(url: str) -> bool:
    with psycopg.connect(url.replace("+psycopg", "")) as connection:
        return bool(
            connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        )


def test_chatbot_on_a_postgresql_without_pgvector_says_what_is_missing_in_one_line(pg_url):
    if has_pgvector(pg_url):
        pytest.skip("this PostgreSQL has pgvector (tests/e2e/test_chatbot_example.py runs the chatbot on it)")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "chatbot.py"), "--offline", "--database-url", pg_url],
        env=without_openai_settings(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    host = pg_url.split("@", 1)[1].split("/", 1)[0]
    assert done.returncode == 2
    assert done.stdout == ""
    assert re.fullmatch(
        rf"error: PostgreSQL at {re.escape(host)} has no pgvector extension: install it \(Debian: "
        r"postgresql-\d+-pgvector, or https://github.com/pgvector/pgvector\) and run `sessionledger "
        r"migrate`, or use SQLite \(sqlite-vec\)\n",
        done.stderr,
    )


@pytest.mark.parametrize("name", makefile_examples())
def test_a_database_an_example_cannot_use_is_one_line_and_exit_2(name, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / f"{name}.py"),
            "--offline",
            "--database-url",
            "postgresql+psycopg://nobody:s3cret@127.0.0.1:1/ledger",
        ],
        cwd=tmp_path,
        env=without_openai_settings(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert re.fullmatch(r"error: cannot use the database: [^\n]*Connection refused[^\n]*\n", done.stderr), (
        done.stderr
    )
    assert "s3cret" not in done.stderr
