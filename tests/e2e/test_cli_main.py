"""The README's main job and the browse/queue commands, run as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kombu import Connection
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.queue_names import QueueNames

from tests.e2e.queue_deployment import RABBITMQ_URL

CLI = str(Path(sys.executable).with_name("sessionledger"))
RABBITMQ = RABBITMQ_URL


def run(
    *args: str, cwd: Path | None = None, timeout: float = 240, **settings: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    env["COLUMNS"] = "200"
    env.update({f"SESSIONLEDGER_{name.upper()}": value for name, value in settings.items()})
    return subprocess.run([CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_demo_on_the_embedded_default_appends_compacts_and_verifies(tmp_path: Path) -> None:
    shown = run("demo", "--conversations", "12", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert (tmp_path / "sessionledger.db").exists(), "the embedded default is ./sessionledger.db"
    assert "tokens before" in shown.stdout and "active window of" in shown.stdout

    result = run("demo", "--conversations", "12", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    sessions = report["sessions"]
    assert len(sessions) == 12 and sum(s["events"] for s in sessions) > 24
    compacted = [s for s in sessions if s["summaries"]]
    assert compacted, "the demo policy compacts the longer conversations"
    assert all(s["window"] < s["events"] and s["tokens_after"] < s["tokens_before"] for s in compacted)

    verified = run("verify", "--json", "--database-url", f"sqlite:///{tmp_path / 'sessionledger.db'}")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert len(json.loads(verified.stdout)) == 24  # both runs' sessions, every chain and window intact


def test_demo_says_what_it_will_do_fits_80_columns_and_ends_with_commands_that_work(tmp_path: Path) -> None:
    """Started by a relative path, as `make demo` starts `.venv/bin/sessionledger`, in a terminal of 80."""
    program = os.path.relpath(CLI, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    env["COLUMNS"] = "80"
    shown = subprocess.run(
        [program, "demo", "--conversations", "15"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(map(len, lines)) <= 80, [line for line in lines if len(line) > 80]
    start = next(i for i, line in enumerate(lines) if "appending, compacted in the background" in line)
    assert "appending 15 ShareGPT conversations as user demo-user" in "\n".join(lines[:start])
    (policy,) = [line for line in lines[:start] if line.startswith("policy: ")]
    assert "4 turns" in policy and "3,000 tokens" in policy and "last 4 events" in policy

    with open_service(f"sqlite:///{tmp_path / 'sessionledger.db'}") as service:
        ids = [session.id for session in service.list_sessions("demo-user")]
    assert len(ids) == 15
    words = set(shown.stdout.split())
    assert all(session_id in words for session_id in ids), "every session id printed whole"

    tail = lines[next(i for i, line in enumerate(lines) if "Look at what it stored" in line) + 1 :]
    browser = next(i for i, line in enumerate(tail) if line.startswith("Or in the browser"))
    commands = " ".join(tail[:browser])
    commands = [shlex.split(command) for command in commands.replace(" \\ ", " ").split(f"  {program} ")[1:]]
    assert [command[0] for command in commands] == ["sessions", "events", "timeline", "verify"]
    serve_at = next(i for i, line in enumerate(tail) if line.startswith(f"  {program} serve"))
    serve = shlex.split(" ".join(tail[serve_at:-1]).replace(" \\ ", " "))
    assert serve[1:] == ["serve", "--database-url", "sqlite:///./sessionledger.db"]
    _served_sessions(tmp_path, env, [program, *serve[1:]], tail[-1], ids)  # the token is the last line
    for command in commands:  # run as printed, from where the demo ran, with no environment activated
        assert command[-2:] == ["--database-url", "sqlite:///./sessionledger.db"]
        ran = subprocess.run(
            [program, *command, "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, (command, ran.stderr)
    listed = subprocess.run(
        [program, *commands[0], "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert sorted(s["id"] for s in json.loads(listed.stdout)) == sorted(ids)


def _served_sessions(cwd: Path, env: dict[str, str], serve: list[str], token: str, ids: list[str]) -> None:
    """The printed `serve` command serves the demo's ledger, and the printed token opens the demo
    user's sessions."""
    import httpx

    from tests.e2e.test_cli_mcp import free_port, wait_for_port

    port = free_port()
    server = subprocess.Popen([*serve, "--port", str(port)], cwd=cwd, env=env, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, server)
        answer = httpx.get(
            f"http://127.0.0.1:{port}/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert sorted(s["id"] for s in answer.json()["sessions"]) == sorted(ids)
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_sessions_and_events_show_a_users_data_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        mine = service.create_session("alice")
        theirs = service.create_session("bob")
        service.append_message(mine.id, UserMessage("hello"))
        service.append_message(mine.id, AssistantMessage("hi there"))
        service.append_message(theirs.id, UserMessage("bob's secret"))

    listed = run("sessions", "--user", "alice", "--json", "--database-url", url)
    assert listed.returncode == 0, listed.stderr
    assert [s["id"] for s in json.loads(listed.stdout)] == [mine.id]

    window = run("events", mine.id, "--json", "--database-url", url)
    assert [e["message"]["text"] for e in json.loads(window.stdout)] == ["hello", "hi there"]

    foreign = run("events", theirs.id, "--user", "alice", "--json", "--database-url", url)
    assert foreign.returncode == 2 and "bob's secret" not in foreign.stdout + foreign.stderr

    unknown = run("events", "no-such-session", "--database-url", url)
    assert unknown.returncode == 2 and unknown.stderr.strip().startswith("error:")
    assert len(unknown.stderr.strip().splitlines()) == 1

    empty_user = run("sessions", "--user", "", "--database-url", url)
    assert empty_user.returncode == 2


@pytest.mark.rabbitmq
def test_stats_and_dead_letter_listing_answer_for_a_deployment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url):
        pass
    stats = run("stats", "--json", "--database-url", url, "--broker-url", RABBITMQ)
    assert stats.returncode == 0, stats.stderr
    assert set(json.loads(stats.stdout)) == {"counters", "queues", "relay_lag", "caveat"}
    prometheus = run("stats", "--prometheus", "--database-url", url, "--broker-url", RABBITMQ)
    assert "# TYPE sessionledger_" in prometheus.stdout

    prefix = f"sl-cli-{uuid.uuid4().hex[:8]}"  # a queue of its own, should listing ever declare one
    try:
        letters = run(
            "dlq", "list", "--json", "--database-url", url, "--broker-url", RABBITMQ, queue_prefix=prefix
        )
        assert letters.returncode == 0, letters.stderr
        assert json.loads(letters.stdout) == [] and "no dead-letter queue" in letters.stderr
    finally:
        with Connection(RABBITMQ) as connection:
            QueueNames(prefix, 1).dead_queue(connection.channel()).delete()

    bad_role = run("worker", "--role", "nope", "--database-url", url, "--broker-url", RABBITMQ)
    assert bad_role.returncode == 2 and "unknown role" in bad_role.stderr


def test_sessions_on_a_narrow_terminal_shows_every_id_whole(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    long_id = "tenant-eu-west-" + uuid.uuid4().hex + "-" + uuid.uuid4().hex
    with open_service(url) as service:
        service.create_session("alice", session_id=long_id)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    shown = subprocess.run(
        [CLI, "sessions", "--user", "alice", "--database-url", url],
        env={**env, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert shown.returncode == 0, shown.stderr
    assert "…" not in shown.stdout
    first_cells = [line.split("│")[1].strip() for line in shown.stdout.splitlines() if line.startswith("│")]
    assert "".join(first_cells) == long_id
