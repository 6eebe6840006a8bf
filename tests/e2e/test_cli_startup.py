"""Each command imports only what it runs on (issue 24): `--version` and `--help` none of the
database, queue or model stacks, a reading command no queue stack and no schema migrations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.ledger.text_index import TextIndexer
from sessionledger.workers import cli as package

STACKS = (
    "sqlalchemy",
    "psycopg",
    "alembic",
    "kombu",
    "celery",
    "pydantic",
    "openai",
    "tiktoken",
    "rich",
    "regex",
)
"""What `--version` and `--help` must not load (rich too: plain help, and no table to print; nor the
domain's filters, which need `regex`)."""
WRITERS = ("celery", "kombu", "alembic")
"""What a reading command must not load: the queue stack and the schema migrations."""
UNUSED_BY_READERS = ("regex", "tiktoken")
"""What a reading command that searches no pattern and counts no tokens must not load: the `regex`
package (imported by the first pattern searched) and the tokenizer (by the first count)."""
NOT_FOR_SQL_READERS = ("sessionledger.domain.compaction", "sessionledger.infrastructure.ledger.memory")
"""What a reading command on a SQL ledger must not load: the compaction machinery (imported by
`compact`) and the in-memory backend (by a memory:// ledger)."""
POSTGRES = ("psycopg", "psycopg_binary", "psycopg_c", "asyncpg", "sqlalchemy.dialects.postgresql")
"""What a command on a SQLite ledger must not load: PostgreSQL's driver and SQLAlchemy's dialect for it
(whose package imports its asyncpg dialect too)."""

_RUN = """
import json, sys, threading
from sessionledger.workers.cli import main
out, sys.argv = sys.argv[1], ["sessionledger", *sys.argv[2:]]
threads, start = [], threading.Thread.start
threading.Thread.start = lambda thread: (threads.append(thread.name), start(thread))[1]
try:
    main()
except SystemExit as exit:
    status = exit.code
with open(out, "w") as file:
    json.dump({"status": status, "modules": sorted(sys.modules), "threads": threads}, file)
"""


def reading_command(command: str, session_id: str) -> list[str]:
    """The arguments of a reading command the startup tests run: `sessions` of the ledger's user,
    or the `events` of its session."""
    return ["sessions", "--user", "alice"] if command == "sessions" else ["events", session_id]


def loaded(tmp_path: Path, *args: str) -> set[str]:
    """The top-level packages imported by one run of the command, which must succeed."""
    return {name.split(".")[0] for name in loaded_modules(tmp_path, *args)}


def loaded_modules(tmp_path: Path, *args: str) -> set[str]:
    """Every module imported by one run of the command, which must succeed."""
    return set(_run(tmp_path, *args)["modules"])


def started_threads(tmp_path: Path, *args: str) -> list[str]:
    """The names of the threads one run of the command started, which must succeed."""
    return list(_run(tmp_path, *args)["threads"])


def _run(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(out), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["status"] in (0, None), done.stdout + done.stderr
    return report


@pytest.mark.parametrize("args", [["--version"], ["--help"]], ids=" ".join)
def test_version_and_help_load_no_database_queue_or_model_stack(tmp_path: Path, args: list[str]) -> None:
    assert loaded(tmp_path, *args) & set(STACKS) == set()


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        session = service.create_session("alice", app_name="app")
        service.append_message(session.id, UserMessage("hello"))
    return url, session.id


@pytest.mark.parametrize("command", ["sessions", "events"])
def test_reading_commands_load_no_queue_stack_and_no_migrations(
    tmp_path: Path, ledger: tuple[str, str], command: str
) -> None:
    url, session_id = ledger
    args = reading_command(command, session_id)
    found = loaded(tmp_path, *args, "--database-url", url)
    assert "sqlalchemy" in found, "the command did read the ledger"
    assert found & set(WRITERS) == set()


def test_the_domains_names_load_on_first_use_and_turns_stays_the_function() -> None:
    """The packages import their names lazily; `turns`, also a submodule's name, is the function
    however the submodule was imported before."""
    code = (
        "import importlib, sys\n"
        "module = importlib.import_module('sessionledger.domain.turns')\n"
        "assert 'sessionledger.domain.compaction' not in sys.modules and 'regex' not in sys.modules\n"
        "from sessionledger.domain import turns, EventFilter\n"
        "from sessionledger import CompactionRequest, UserMessage, turns as same\n"
        "assert turns is module.turns is same and callable(turns), turns\n"
        "assert EventFilter.__module__ == 'sessionledger.domain.filters'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("command", ["sessions", "events"])
def test_reading_commands_on_sqlite_load_no_postgresql_driver_or_dialect(
    tmp_path: Path, ledger: tuple[str, str], command: str
) -> None:
    """psycopg and the PostgreSQL dialect are imported when a PostgreSQL URL is opened, not before."""
    url, session_id = ledger
    args = reading_command(command, session_id)
    found = loaded_modules(tmp_path, *args, "--database-url", url)
    assert "sqlalchemy.dialects.sqlite" in found, "the command did open the SQLite ledger"
    assert {name for name in found if name.startswith(POSTGRES)} == set()


@pytest.mark.parametrize("command", ["sessions", "events"])
def test_reading_commands_load_no_pattern_search_and_no_tokenizer(
    tmp_path: Path, ledger: tuple[str, str], command: str
) -> None:
    url, session_id = ledger
    args = reading_command(command, session_id)
    found = loaded(tmp_path, *args, "--database-url", url)
    assert found & set(UNUSED_BY_READERS) == set()


@pytest.mark.parametrize("command", ["sessions", "events"])
def test_reading_commands_on_sqlite_load_no_compaction_and_no_memory_backend(
    tmp_path: Path, ledger: tuple[str, str], command: str
) -> None:
    url, session_id = ledger
    args = reading_command(command, session_id)
    found = loaded_modules(tmp_path, *args, "--database-url", url)
    assert "sessionledger.infrastructure.ledger.sql" in found, "the command did open the SQL ledger"
    assert {name for name in found if name.startswith(NOT_FOR_SQL_READERS)} == set()


def test_each_command_is_found_in_the_module_it_imports_alone() -> None:
    """`main` imports only the module `HOMES` names for the command run: every command the
    application has must be there, in the module that registers it."""
    from importlib import import_module

    from typer.main import get_command_name

    for module in package.MODULES:
        import_module(f"{package.__name__}.{module}")
    found: dict[str, str] = {}
    for info in package.cli.registered_commands:
        assert info.callback is not None
        found[info.name or get_command_name(info.callback.__name__)] = info.callback.__module__
    for group in package.cli.registered_groups:
        assert group.name and group.typer_instance and group.typer_instance.registered_commands[0].callback
        found[group.name] = group.typer_instance.registered_commands[0].callback.__module__
    assert found == {name: f"{package.__name__}.{home}" for name, home in package.HOMES.items()}


def test_a_reading_command_imports_no_other_commands_module(tmp_path: Path, ledger: tuple[str, str]) -> None:
    url, session_id = ledger
    found = loaded_modules(tmp_path, "events", session_id, "--database-url", url)
    others = {f"{package.__name__}.{name}" for name in ("demo", "queue", "migrate", "fake_llm")}
    assert "sessionledger.workers.cli.browse" in found and found & others == set()


@pytest.mark.parametrize("command", ["sessions", "events"])
def test_reading_commands_on_postgresql_run_no_text_indexer(
    tmp_path: Path, pg_url: str, command: str
) -> None:
    """A reading command starts no keyword indexer thread and leaves `ledger_text` as it was,
    here empty behind a session written with the indexer off."""
    with open_service(pg_url, text_index="off") as service:
        session = service.create_session("alice", app_name="app")
        service.append_message(session.id, UserMessage("hello"))
        engine: sa.Engine = service.ledger.engine  # type: ignore[attr-defined]
        threads = started_threads(tmp_path, *reading_command(command, session.id), "--database-url", pg_url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM ledger_text")).scalar_one() == 0
    assert TextIndexer.THREAD not in threads
