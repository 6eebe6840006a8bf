"""The README's examples run as written, each on its own, and so do the agents guide's
(docs/agents.md, where the README sends readers for more): every ```python block in a fresh process
started in an empty temporary directory with no SESSIONLEDGER_* or OPENAI_* variable set (so no
API key), failing with the file and line the block starts on.

Each runs on the embedded default (the SQLite file `open_service()` creates in its directory); the
first, which says what `open_service()` opens, also with SESSIONLEDGER_DATABASE_URL naming a fresh
PostgreSQL database. The one substitution: the broker URL the README writes
(`WRITTEN_BROKER`) becomes the test's broker, with a queue prefix of the test's own
(SESSIONLEDGER_QUEUE_PREFIX), whose queues are removed after. Also here: every command the README
names exists, every extra it installs is the package's, and its compaction policies load.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import Connection
from sessionledger.infrastructure.policies import load_policies
from sessionledger.infrastructure.queue_names import QueueNames
from sessionledger.infrastructure.summarizers.extractive import ExtractiveSummarizer
from sessionledger.workers.cli import main as sessionledger_command

import sessionledger
from tests.e2e.queue_deployment import RABBITMQ_URL, remove_queues

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDES = ("README.md", "docs/agents.md")
"""The documents whose ```python blocks run as written."""
WRITTEN_BROKER = "amqp://guest:guest@localhost:5672//"

RUNNER = """
import sys
first_line, document, code = int(sys.argv[1]), sys.argv[2], sys.stdin.read()
# padded so that a traceback names the document's own line
exec(compile("\\n" * (first_line - 1) + code, document, "exec"), {"__name__": "__main__"})
"""


def fenced_blocks(text: str, language: str) -> list[tuple[int, str]]:
    """Each ```<language> block's code and the README line it starts on."""
    pattern = rf"^```{re.escape(language)}\n(.*?)^```$"
    return [
        (text.count("\n", 0, found.start(1)) + 1, found.group(1))
        for found in re.finditer(pattern, text, re.MULTILINE | re.DOTALL)
    ]


def run_block(
    line: int, code: str, directory: Path, document: str = "README.md", **variables: str
) -> subprocess.CompletedProcess:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SESSIONLEDGER_", "OPENAI_"))
    }
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(line), document],
        input=code,
        cwd=directory,
        env={**env, **variables},
        capture_output=True,
        text=True,
        timeout=180,
    )


def python_blocks() -> list[tuple[str, int, str]]:
    """Every ```python block of the documents that run: (document, line, code)."""
    return [
        (document, line, code)
        for document in GUIDES
        for line, code in fenced_blocks((ROOT / document).read_text(encoding="utf-8"), "python")
    ]


def block_cases() -> list:
    cases = []
    for number, (document, line, code) in enumerate(python_blocks()):
        marks = [pytest.mark.rabbitmq] if WRITTEN_BROKER in code else []
        cases.append(pytest.param(document, line, code, "embedded", marks=marks, id=f"{document}:{line}"))
        if number == 0:  # the README's first block: it says what `open_service()` opens
            postgres = [*marks, pytest.mark.postgres]
            cases.append(
                pytest.param(
                    document, line, code, "postgres", marks=postgres, id=f"{document}:{line}-postgres"
                )
            )
    return cases


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


@pytest.mark.parametrize(("document", "line", "code", "ledger"), block_cases())
def test_each_python_block_runs_on_its_own(document, line, code, ledger, request, tmp_path) -> None:
    variables = {}
    if ledger == "postgres":
        variables["SESSIONLEDGER_DATABASE_URL"] = request.getfixturevalue("pg_url")
    publishes = WRITTEN_BROKER in code
    if publishes:
        names = request.getfixturevalue("queue_names")
        variables["SESSIONLEDGER_QUEUE_PREFIX"] = names.prefix
        code = code.replace(WRITTEN_BROKER, RABBITMQ_URL)

    result = run_block(line, code, tmp_path, document, **variables)

    assert result.returncode == 0, f"the block at {document} line {line} failed:\n{result.stderr}"
    if publishes:
        assert waiting_messages(names) == 1  # the event published, waiting for an ingest worker


def test_the_readme_and_the_guide_have_python_examples_of_each_part() -> None:
    blocks = [code for _, _, code in python_blocks()]
    for needed in (
        "open_service(",
        "compact(",
        "verify(",
        "open_async_service(",
        "EventPublisher(",
        "SessionMemory(",
        "MessageWindowChatMemory(",
        "MemoryChat(",
        "offline_client(",
    ):
        assert any(needed in code for code in blocks), needed


def test_a_broken_block_fails_naming_its_readme_line(tmp_path) -> None:
    code = "from sessionledger import open_service\n\nopen_service.no_such_thing\n"
    result = run_block(9, code, tmp_path)
    assert result.returncode != 0
    assert 'File "README.md", line 11' in result.stderr and "AttributeError" in result.stderr


def test_a_block_runs_without_the_blocks_before_it(tmp_path) -> None:
    """What the old runner hid: a block using a name that only an earlier block defined."""
    result = run_block(1, "with open_service() as service:\n    pass\n", tmp_path)
    assert result.returncode != 0 and "NameError" in result.stderr


def test_no_block_sees_an_api_key(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-readme")
    result = run_block(1, "import os\nassert 'OPENAI_API_KEY' not in os.environ\n", tmp_path)
    assert result.returncode == 0, result.stderr


def named_commands(text: str) -> set[str]:
    """`sessionledger <command>` anywhere, and the commands after ` / ` in the command table."""
    found = set(re.findall(r"\bsessionledger ([a-z][a-z-]*)", text))
    for row in re.findall(r"^\| `sessionledger [^|]*\|", text, re.MULTILINE):
        found.update(re.findall(r"/ `([a-z][a-z-]*)", row))
    return found


def help_status(command: str, monkeypatch: pytest.MonkeyPatch) -> int | str | None:
    """The exit status of `sessionledger <command> --help`, through the console script's own entry
    point (in this process: one start-up for every command)."""
    monkeypatch.setattr(sys, "argv", ["sessionledger", command, "--help"])
    with pytest.raises(SystemExit) as exited:
        sessionledger_command()
    return exited.value.code


def test_every_command_the_readme_names_exists(monkeypatch, capsys) -> None:
    commands = named_commands(README)
    assert {"demo", "verify", "worker", "import", "check-proof"} <= commands
    missing = [command for command in sorted(commands) if help_status(command, monkeypatch) != 0]
    assert not missing, f"the README names commands that do not exist: {missing}"


def test_the_command_check_catches_an_unknown_command(monkeypatch, capsys) -> None:
    assert named_commands("run `sessionledger no-such-command`") == {"no-such-command"}
    assert help_status("no-such-command", monkeypatch) != 0


def test_every_extra_installed_is_the_packages_and_every_extra_is_listed() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    installed = set(re.findall(r"pip install [^\n]*?\[([a-z-]+)\]", README))
    listed = set(re.findall(r"^\| `([a-z-]+)`(?: / `([a-z-]+)`)? \|", README, re.MULTILINE))
    listed_names = {name for pair in listed for name in pair if name}
    assert installed and installed <= extras, installed - extras
    assert extras <= listed_names, f"extras the README does not list: {extras - listed_names}"


def test_the_readme_policies_load() -> None:
    blocks = fenced_blocks(README, "toml")
    assert blocks
    for line, text in blocks:
        apps = re.findall(r"^\[apps\.([\w-]+)\]", text, re.MULTILINE)
        book = load_policies(ExtractiveSummarizer, inline=text)  # ValueError naming what is wrong
        assert apps and all(book.for_app(app) for app in apps), f"README.md line {line}"


def test_the_wheel_the_readme_installs_is_this_versions() -> None:
    wheels = set(re.findall(r"dist/(sessionledger-[^\s\[']+\.whl)", README))
    assert wheels == {f"sessionledger-{sessionledger.__version__}-py3-none-any.whl"}
