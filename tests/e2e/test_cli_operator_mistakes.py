"""Operators' mistakes, made with every `sessionledger` command as an operator runs it (the installed
entry point, from an empty working directory): a malformed or unsupported URL, a missing SQLite
directory, a database or broker that does not answer or refuses, no ledger where a reading command
looks, a compaction policy that does not parse. Each one is answered with exit status 2 and exactly
one line on stderr (no traceback), shows no password, and creates nothing: no file, database,
schema or queue."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import sqlalchemy as sa
from alembic import command as alembic
from kombu import Connection
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.ledger.migrate import _config, current_revision, head_revision
from sessionledger.infrastructure.queue_names import QueueNames

from tests.conftest import PG_ADMIN_URL
from tests.e2e.queue_deployment import RABBITMQ_URL, free_port

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.slow]

CLI = str(Path(sys.executable).with_name("sessionledger"))
SECRET = "pw-5ecret-9c41"
"""The password of every URL given below; no output may show it."""

READING = {
    "verify": ["verify"],
    "events": ["events", "s-1"],
    "replay": ["replay", "s-1"],
    "sessions": ["sessions", "--user", "u"],
    "export": ["export", "s-1"],
    "timeline": ["timeline", "s-1"],
    "stats": ["stats", "--broker-url", RABBITMQ_URL],
}
WRITING = {
    "demo": ["demo", "-n", "1"],
    "import": ["import", "-"],
    "migrate": ["migrate"],
    "relay": ["relay", "--broker-url", RABBITMQ_URL],
}
STARTING = {"worker": ["worker", "--broker-url", RABBITMQ_URL]}
"""A worker of every role (`all`, the default) needs its database at start, as its relay does;
`--role ingest` and `tasks` alone wait out a database they cannot reach (an outage, not a mistake
in the command), so they are not tried here."""
QUEUE = {
    "worker": ["worker"],
    "relay": ["relay"],
    "dlq list": ["dlq", "list"],
    "dlq replay": ["dlq", "replay"],
    "stats": ["stats"],
}


def _postgres(**parts: object) -> str:
    url = sa.make_url(PG_ADMIN_URL).set(drivername="postgresql+psycopg", password=SECRET, **parts)
    return url.render_as_string(hide_password=False)


ABSENT_DATABASE = f"sl_absent_{uuid.uuid4().hex[:10]}"
MALFORMED = {
    "not a URL": "notaurl",
    "a relative SQLite path after two slashes": "sqlite://relative.db",
    "a port that is not a number": f"postgresql+psycopg://u:{SECRET}@127.0.0.1:notaport/db",
    "an unsupported database": f"oracle://u:{SECRET}@127.0.0.1/db",
}
UNREACHABLE = {
    "a database name that does not exist": _postgres(database=ABSENT_DATABASE),
    "a port nothing listens on": _postgres(port=free_port(), database="x"),
    "a host that does not exist": _postgres(host="no-such-host.invalid", database="x"),
}


def _rabbitmq(*, password: str | None = None, port: int | None = None, vhost: str | None = None) -> str:
    """The test broker's URL with one part changed."""
    parts = urlsplit(RABBITMQ_URL)
    user, real_password = parts.username or "", parts.password or ""
    netloc = f"{user}:{password or real_password}@{parts.hostname}:{port or parts.port or 5672}"
    return urlunsplit((parts.scheme, netloc, vhost or parts.path, "", ""))


BAD_BROKERS = {
    "not a URL": "notaurl",
    "an unknown transport": f"nosuch://u:{SECRET}@127.0.0.1//",
    "a refused connection": _rabbitmq(password=SECRET, port=free_port()),
    "a refused login": _rabbitmq(password=SECRET),
    "a virtual host that does not exist": _rabbitmq(vhost=f"/sl-absent-{uuid.uuid4().hex[:8]}"),
    "a refused Redis connection": f"redis://:{SECRET}@127.0.0.1:{free_port()}/0",
}
BAD_POLICY = """
[apps.default]
trigger = { type = "turnz", max_turns = 3 }
strategy = { type = "sliding", max_events = 3 }
"""


@dataclass(frozen=True)
class Case:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    prefix: str = "error: "
    """How the one line starts (`python -m sessionledger.workers.launch` says `sessionledger: `)."""


@pytest.fixture
def queue_prefix() -> Iterator[str]:
    """A fresh queue prefix; nothing of it may exist on the broker afterwards."""
    names = QueueNames(f"slmistake-{uuid.uuid4().hex[:10]}", 2)
    yield names.prefix
    assert _declared(names) == [], "a failed command declared queues"


def _declared(names: QueueNames) -> list[str]:
    found = []
    with Connection(RABBITMQ_URL) as connection:
        for queue in names.all_queues():
            channel = connection.channel()
            try:
                queue(channel).queue_declare(passive=True)
                found.append(queue.name)
            except connection.channel_errors:
                pass
            finally:
                channel.close()
    return found


def _environment(queue_prefix: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    return {**env, "COLUMNS": "200", "SESSIONLEDGER_QUEUE_PREFIX": queue_prefix, **extra}


def _cli(name: str, args: Sequence[str], env: Mapping[str, str], *options: str) -> Case:
    return Case(name, [CLI, *args, *options], env)


def _answers_in_one_line(cases: Sequence[Case], workdirs: Path) -> None:
    """Run every case (a few at a time) from its own empty directory; assert what each answered."""
    workdirs.mkdir()

    def run(indexed: tuple[int, Case]) -> list[str]:
        index, case = indexed
        cwd = workdirs / str(index)
        cwd.mkdir()
        result = subprocess.run(
            case.argv,
            cwd=cwd,
            env=case.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
        lines = result.stderr.splitlines()
        problems = []
        if result.returncode != 2:
            problems.append(f"exit status {result.returncode}")
        if len(lines) != 1 or not lines[0].startswith(case.prefix):
            problems.append(f"{len(lines)} lines on stderr")
        if "Traceback" in result.stderr:
            problems.append("a traceback")
        if SECRET in result.stdout + result.stderr:
            problems.append("the password")
        if left := sorted(p.name for p in cwd.iterdir()):
            problems.append(f"left {left}")
        return [f"{case.name}: {', '.join(problems)}\n{result.stderr[-2000:]}"] if problems else []

    with ThreadPoolExecutor(max_workers=4) as pool:
        found = [problem for problems in pool.map(run, enumerate(cases)) for problem in problems]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("mistake", [*MALFORMED, *UNREACHABLE])
def test_a_wrong_database_url_is_one_line_on_every_command(
    mistake: str, queue_prefix: str, tmp_path: Path
) -> None:
    url = {**MALFORMED, **UNREACHABLE}[mistake]
    commands = {**READING, **WRITING, **STARTING}
    env = _environment(queue_prefix)
    _answers_in_one_line(
        [_cli(f"{name} with {mistake}", args, env, "--database-url", url) for name, args in commands.items()],
        tmp_path / "cwd",
    )
    _assert_no_such_database(ABSENT_DATABASE)


def test_a_missing_sqlite_directory_is_one_line_and_stays_missing(queue_prefix: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    url = f"sqlite:///{missing / 'ledger.db'}"
    env = _environment(queue_prefix)
    commands = {**READING, **WRITING, **STARTING}
    _answers_in_one_line(
        [_cli(f"{name} with {url}", args, env, "--database-url", url) for name, args in commands.items()],
        tmp_path / "cwd",
    )
    assert not missing.exists()


def test_reading_commands_find_no_ledger_and_make_none(
    queue_prefix: str, pg_url: str, tmp_path: Path
) -> None:
    absent = tmp_path / "absent.db"
    old = _ledger_at_revision(tmp_path / "old.db", "0002")
    env = _environment(queue_prefix)
    places = {
        "the default in an empty directory": [],
        "an absent SQLite file": ["--database-url", f"sqlite:///{absent}"],
        "an empty PostgreSQL database": ["--database-url", pg_url],
        "an older schema": ["--database-url", old],
    }
    _answers_in_one_line(
        [
            _cli(f"{name} at {place}", args, env, *options)
            for place, options in places.items()
            for name, args in READING.items()
        ],
        tmp_path / "cwd",
    )
    assert not absent.exists()
    engine = create_ledger_engine(pg_url)
    try:
        assert sa.inspect(engine).get_table_names() == [], "a reading command created a schema"
    finally:
        engine.dispose()
    assert _revision(old) == "0002", "a reading command migrated the ledger"


def test_migrate_upgrades_the_ledger_that_reading_commands_refuse(tmp_path: Path) -> None:
    old = _ledger_at_revision(tmp_path / "old.db", "0002")
    env = _environment("unused")
    refused = subprocess.run([CLI, "verify", "--database-url", old], env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "sessionledger migrate" in refused.stderr
    migrated = subprocess.run(
        [CLI, "migrate", "--database-url", old], env=env, capture_output=True, text=True
    )
    assert migrated.returncode == 0, migrated.stderr
    assert head_revision() in migrated.stdout and _revision(old) == head_revision()
    verified = subprocess.run([CLI, "verify", "--database-url", old], env=env, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr


@pytest.mark.parametrize("mistake", list(BAD_BROKERS))
def test_a_broker_that_cannot_be_used_is_one_line_on_every_queue_command(
    mistake: str, queue_prefix: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    open_service(f"sqlite:///{ledger}").close()
    env = _environment(queue_prefix)
    options = ["--database-url", f"sqlite:///{ledger}", "--broker-url", BAD_BROKERS[mistake]]
    _answers_in_one_line(
        [_cli(f"{name} with {mistake}", args, env, *options) for name, args in QUEUE.items()],
        tmp_path / "cwd",
    )


def test_a_policy_that_does_not_parse_stops_workers_at_start(queue_prefix: str, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    open_service(f"sqlite:///{ledger}").close()
    url = f"sqlite:///{ledger}"
    env = _environment(queue_prefix, SESSIONLEDGER_POLICY=BAD_POLICY)
    launcher = _environment(
        queue_prefix,
        SESSIONLEDGER_POLICY=BAD_POLICY,
        SESSIONLEDGER_DATABASE_URL=url,
        SESSIONLEDGER_BROKER_URL=RABBITMQ_URL,
    )
    cases = [
        *(
            _cli(
                f"worker --role {role}",
                ["worker", "--role", role],
                env,
                "--database-url",
                url,
                "--broker-url",
                RABBITMQ_URL,
            )
            for role in ("all", "ingest", "tasks", "relay")
        ),
        _cli("relay", ["relay"], env, "--database-url", url, "--broker-url", RABBITMQ_URL),
        *(
            Case(
                f"launch {role}",
                [sys.executable, "-m", "sessionledger.workers.launch", role],
                launcher,
                "sessionledger: ",
            )
            for role in ("all", "relay")
        ),
    ]
    _answers_in_one_line(cases, tmp_path / "cwd")
    told = subprocess.run(
        [CLI, "relay", "--database-url", url, "--broker-url", RABBITMQ_URL],
        env=env,
        capture_output=True,
        text=True,
    )
    assert "apps.default.trigger: unknown type 'turnz'" in told.stderr


def _ledger_at_revision(path: Path, revision: str) -> str:
    """A SQLite ledger whose schema an older version left (`revision`)."""
    url = f"sqlite:///{path}"
    engine = create_ledger_engine(url)
    try:
        with engine.begin() as connection:
            config = _config()
            config.attributes["connection"] = connection
            alembic.upgrade(config, revision)
    finally:
        engine.dispose()
    return url


def _revision(url: str) -> str | None:
    engine = create_ledger_engine(url, read_only=True)
    try:
        with engine.connect() as connection:
            return current_revision(connection)
    finally:
        engine.dispose()


def _assert_no_such_database(name: str) -> None:
    engine = sa.create_engine(sa.make_url(PG_ADMIN_URL).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as connection:
            found = connection.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
            ).all()
    finally:
        engine.dispose()
    assert found == [], f"a failed command created the database {name}"
