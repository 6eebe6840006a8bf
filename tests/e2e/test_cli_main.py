"""The README's main job and the browse/queue commands, run as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import open_service

from tests.e2e.queue_deployment import RABBITMQ_URL

CLI = str(Path(sys.executable).with_name("sessionledger"))
RABBITMQ = RABBITMQ_URL


def run(*args: str, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    env["COLUMNS"] = "200"
    return subprocess.run([CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_demo_on_the_embedded_default_publishes_compacts_and_verifies(tmp_path: Path) -> None:
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
    assert set(json.loads(stats.stdout)) == {"counters", "queues", "relay_lag"}
    prometheus = run("stats", "--prometheus", "--database-url", url, "--broker-url", RABBITMQ)
    assert "# TYPE sessionledger_" in prometheus.stdout

    letters = run("dlq", "list", "--json", "--database-url", url, "--broker-url", RABBITMQ)
    assert letters.returncode == 0, letters.stderr
    assert isinstance(json.loads(letters.stdout), list)

    bad_role = run("worker", "--role", "nope", "--database-url", url, "--broker-url", RABBITMQ)
    assert bad_role.returncode == 2 and "unknown role" in bad_role.stderr
