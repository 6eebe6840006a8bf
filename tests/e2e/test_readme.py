"""The README's Python examples run as written: every ```python block, in order, in one namespace,
in a fresh process started in an empty directory with no SESSIONLEDGER_* or OPENAI_* variable set.

Once on the embedded default (the SQLite file the examples create there), once with
SESSIONLEDGER_DATABASE_URL naming a fresh PostgreSQL database, as the examples' comments say. The
one substitution: the broker URL the README writes (`WRITTEN_BROKER`) becomes the test's broker,
with a queue prefix of the test's own (SESSIONLEDGER_QUEUE_PREFIX), whose queues are removed after.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import Connection
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.queue_names import QueueNames

from tests.e2e.queue_deployment import RABBITMQ_URL, remove_queues

pytestmark = pytest.mark.rabbitmq

ROOT = Path(__file__).resolve().parents[2]
WRITTEN_BROKER = "amqp://guest:guest@localhost:5672//"

RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for first_line, code in json.load(sys.stdin):
    # padded so that a traceback names the README's own line
    exec(compile("\\n" * (first_line - 1) + code, "README.md", "exec"), namespace)
"""


def python_blocks(text: str) -> list[tuple[int, str]]:
    """Each ```python block's code and the README line it starts on."""
    return [
        (text.count("\n", 0, found.start(1)) + 1, found.group(1))
        for found in re.finditer(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    ]


def run_blocks(
    blocks: list[tuple[int, str]], directory: Path, **variables: str
) -> subprocess.CompletedProcess:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SESSIONLEDGER_", "OPENAI_"))
    }
    return subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(blocks),
        cwd=directory,
        env={**env, **variables},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture
def queue_names() -> Iterator[QueueNames]:
    names = QueueNames(f"sltest-readme-{uuid.uuid4().hex[:10]}", 2)
    yield names
    remove_queues(RABBITMQ_URL, names)


def waiting_messages(names: QueueNames) -> int:
    with Connection(RABBITMQ_URL) as connection:
        channel = connection.channel()
        return sum(
            queue(channel).queue_declare(passive=True).message_count for queue in names.ingest_queues()
        )


@pytest.mark.parametrize("ledger", ["embedded", "postgres"])
def test_the_readme_examples_run_as_written(ledger, request, tmp_path, queue_names) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert WRITTEN_BROKER in readme
    blocks = [(line, code.replace(WRITTEN_BROKER, RABBITMQ_URL)) for line, code in python_blocks(readme)]
    assert len(blocks) >= 3 and any("EventPublisher(" in code for _, code in blocks)
    variables = {"SESSIONLEDGER_QUEUE_PREFIX": queue_names.prefix}
    if ledger == "postgres":
        variables["SESSIONLEDGER_DATABASE_URL"] = database_url = request.getfixturevalue("pg_url")
    else:
        database_url = f"sqlite:///{tmp_path / 'sessionledger.db'}"

    result = run_blocks(blocks, tmp_path, **variables)

    assert result.returncode == 0, result.stderr
    with open_service(database_url) as service:
        sessions = service.list_sessions("alice", app_name="support")
        assert len(sessions) == 2  # the Python example's and the queue example's
        assert any(service.get_events(session.id) for session in sessions)
    assert waiting_messages(queue_names) == 1  # the event published, waiting for an ingest worker


def test_a_broken_example_fails_naming_its_readme_line(tmp_path) -> None:
    blocks = [
        (3, "from sessionledger.infrastructure import open_service\n"),
        (9, "\nopen_service.no_such_thing\n"),
    ]
    result = run_blocks(blocks, tmp_path)
    assert result.returncode != 0
    assert 'File "README.md", line 10' in result.stderr and "AttributeError" in result.stderr
