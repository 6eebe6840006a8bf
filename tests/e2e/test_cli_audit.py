"""The audit commands as a user runs them: `sessionledger replay|verify|export|import|timeline`.

Exit status 0 on success, 1 when a check fails (verify, a tampered import), 2 on bad arguments or
unknown sessions, with one line on stderr; `--json` for machines. And deletion for privacy: the
messages are gone from search, `events --all` and exports, the erasure is on record, and
`verify` still passes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from sessionledger.domain import AssistantMessage, EventFilter, SessionEvent, UserMessage
from sessionledger.domain.compaction import RecursiveSummarizationStrategy
from sessionledger.domain.hashing import canonical
from sessionledger.domain.replay import replay
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit.parallel import JOBS_PER_CPU, max_jobs

from tests.fakes.compaction import Always

SECRET = "my passport number is X1234567"
CLI = str(Path(sys.executable).with_name("sessionledger"))


class Summarizer:
    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "The user asked six questions."


@dataclass
class Store:
    url: str
    path: Path
    session_id: str

    def run(self, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, *args, "--database-url", url or self.url],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},  # rich tables as wide as a terminal
        )


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A SQLite ledger with one session: six turns, a summary, a rewind and one more message."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    with open_service(url) as service:
        session_id = service.create_session("alice", app_name="audit", state={"topic": "travel"}).id
        for turn in range(6):
            text = SECRET if turn == 1 else f"question {turn}"
            service.append_event(
                SessionEvent(session_id=session_id, message=UserMessage(text), invocation_id=f"t{turn}")
            )
            service.append_message(session_id, AssistantMessage(f"answer {turn}"), state_delta={"turn": turn})
        service.compact(
            session_id, Always(), RecursiveSummarizationStrategy(Summarizer(), max_events_to_keep=4)
        )
        service.rewind(session_id, "t5")
        service.append_message(session_id, UserMessage("and now?"))
    return Store(url, path, session_id)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_verify_passes_with_status_0(store: Store) -> None:
    one = store.run("verify", store.session_id, "--json")
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["ok"] is True
    everything = store.run("verify")
    assert everything.returncode == 0
    assert store.session_id in everything.stdout and "ok" in everything.stdout


def test_verify_names_the_break_with_status_1(store: Store) -> None:
    with sqlite3.connect(store.path) as db:
        db.execute(
            "UPDATE ledger SET payload = replace(payload, 'question 3', 'question 33') "
            "WHERE session_id = ? AND position = 8",
            (store.session_id,),
        )
    result = store.run("verify", store.session_id)
    assert result.returncode == 1
    assert "edited at position 8" in one_line_error(result)
    as_json = store.run("verify", "--json")
    assert as_json.returncode == 1
    [found] = json.loads(as_json.stdout)
    assert found["ok"] is False and found["findings"][0] == {
        "kind": "edited",
        "position": 8,
        "detail": "record 8: its payload does not match its content hash",
    }


def test_replay_rebuilds_any_version_from_the_ledger(store: Store) -> None:
    with open_service(store.url) as service:
        records = service.records(store.session_id)
    latest = records[-1].version
    for version in (0, 5, latest):
        result = store.run("replay", store.session_id, "--version", str(version), "--json")
        assert result.returncode == 0, result.stderr
        shown = json.loads(result.stdout)
        expected = replay(records, upto_version=version)
        assert shown["version"] == version
        assert [e["id"] for e in shown["window"]] == [e.id for e in expected.window]
        assert shown["state"] == dict(expected.session_state)
    now = json.loads(store.run("replay", store.session_id, "--json").stdout)
    [stand_in] = now["stand_ins"]
    assert stand_in["summaries"] == [e["position"] for e in now["window"][:2]]
    assert len(stand_in["covers"]) == len(stand_in["archived"]) > 0
    at = records[3].recorded_at.isoformat()  # type: ignore[union-attr]
    by_time = json.loads(store.run("replay", store.session_id, "--at", at, "--json").stdout)
    assert by_time["version"] == records[3].version
    people = store.run("replay", store.session_id)
    assert (
        people.returncode == 0
        and "window of" in people.stdout
        and "The user asked six questions." in people.stdout
    )


def test_replay_shows_what_the_model_saw(store: Store) -> None:
    with open_service(store.url) as service:
        reply = service.get_events(store.session_id, EventFilter.active())[-1]
    result = store.run("replay", store.session_id, "--event", reply.id, "--json")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["event"]["id"] == reply.id
    assert seen["summary"] == "The user asked six questions."
    assert "<knowledge>" in seen["facts"] and "The user asked six questions." in seen["system_prompt"]
    assert reply.id not in [e["id"] for e in seen["before"]["window"]]


@pytest.mark.parametrize(
    "args",
    [
        ("replay", "no-such-session"),
        ("replay", "{session}", "--version", "999"),
        ("replay", "{session}", "--version", "1", "--at", "2026-01-01T00:00:00Z"),
        ("replay", "{session}", "--event", "no-such-event"),
        ("replay", "{session}", "--at", "0001-01-01T00:00:00+14:00"),  # issue 25: was an OverflowError
        ("replay", "{session}", "--at", "9999-12-31T23:59:59-14:00"),
        ("verify", "no-such-session"),
        ("timeline", "no-such-session"),
        ("import", "/no/such/file.jsonl"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(store: Store, args: tuple[str, ...]) -> None:
    result = store.run(*(a.format(session=store.session_id) for a in args))
    assert result.returncode == 2, (result.stdout, result.stderr)
    one_line_error(result)


def test_verify_refuses_more_jobs_than_the_machine_can_use(store: Store) -> None:
    """Issue 25: `--jobs 200` forked 200 processes; more than `max_jobs()` is refused at once."""
    most = max_jobs()
    assert store.run("verify", "--jobs", str(most)).returncode == 0
    for jobs in (most + 1, 100_000):
        result = store.run("verify", "--jobs", str(jobs))
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert one_line_error(result) == (
            f"error: --jobs is at most {most} on this machine ({JOBS_PER_CPU} per usable CPU), got {jobs}"
        )


def test_export_import_round_trip_and_refusals(store: Store, tmp_path: Path) -> None:
    exported = store.run("export", store.session_id)
    assert exported.returncode == 0
    dump = tmp_path / "session.jsonl"
    dump.write_text(exported.stdout, encoding="utf-8")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = store.run("import", str(dump), "--json", url=other)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["session_id"] == store.session_id
    assert store.run("verify", url=other).returncode == 0
    assert (
        store.run("export", store.session_id, url=other).stdout.splitlines()[1:]
        == exported.stdout.splitlines()[1:]
    )
    again = store.run("import", str(dump), url=other)
    assert again.returncode == 2 and "already exists" in one_line_error(again)
    lines = exported.stdout.splitlines()
    record = json.loads(lines[3])
    record["payload"]["message"]["text"] = "forged"
    lines[3] = canonical(record)
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tampered = store.run("import", str(dump), url=f"sqlite:///{tmp_path / 'third.db'}")
    assert tampered.returncode == 1
    assert "edited at position 3" in one_line_error(tampered)


def test_a_failed_import_leaves_nothing_behind(store: Store, tmp_path: Path) -> None:
    """An endless line is refused once it passes the line limit (memory stays bounded), and no
    failure, whatever its cause, leaves a new ledger behind or changes an existing one."""
    new = tmp_path / "new.db"
    endless = store.run("import", "/dev/zero", url=f"sqlite:///{new}")
    assert endless.returncode == 2 and "line 1 is longer than" in one_line_error(endless)
    exported = store.run("export", store.session_id).stdout
    lines = exported.splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join([*lines[:3], lines[3][:40], *lines[4:]]) + "\n", encoding="utf-8")
    broken = store.run("import", str(cut), url=f"sqlite:///{new}")
    assert broken.returncode == 2 and "line 4: not JSON" in one_line_error(broken)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("new.db")) == []

    dump = tmp_path / "session.jsonl"
    dump.write_text(exported, encoding="utf-8")
    before = sqlite3.connect(store.path).iterdump()
    kept = "\n".join(before)
    again = store.run("import", str(dump))
    assert again.returncode == 2 and "already exists" in one_line_error(again)
    assert "\n".join(sqlite3.connect(store.path).iterdump()) == kept


def test_timeline_shows_compactions_rewinds_and_erasure(store: Store) -> None:
    people = store.run("timeline", store.session_id)
    assert people.returncode == 0
    for word in ("created", "compaction", "archived", "rewind", "hid positions"):
        assert word in people.stdout
    with open_service(store.url) as service:
        service.delete_session(store.session_id)
    entries = json.loads(store.run("timeline", store.session_id, "--json").stdout)
    kinds = [e["kind"] for e in entries]
    assert kinds[0] == "created" and "compaction" in kinds and "rewind" in kinds and kinds[-1] == "erasure"
    compaction = entries[kinds.index("compaction")]
    assert len(compaction["details"]["archived_event_ids"]) == len(compaction["details"]["archived"]) > 0
    assert entries[-1]["details"]["reason"] == "deleted"


def test_deletion_makes_the_messages_unreadable_everywhere(store: Store) -> None:
    with open_service(store.url) as service:
        assert service.get_events(store.session_id, EventFilter.keyword_search("passport"))
        service.delete_session(store.session_id)
        assert service.get_events(store.session_id, EventFilter.keyword_search("passport")) == []
        assert service.get_events(store.session_id, EventFilter.all()) == []
    listed = store.run("events", store.session_id, "--all")
    assert SECRET not in listed.stdout + listed.stderr
    exported = store.run("export", store.session_id)
    assert exported.returncode == 0 and SECRET not in exported.stdout and "passport" not in exported.stdout
    header = json.loads(exported.stdout.splitlines()[0])
    erasure = json.loads(exported.stdout.splitlines()[-1])
    assert header["deleted"] is True
    assert erasure["kind"] == "erasure" and erasure["payload"]["reason"] == "deleted"
    assert erasure["payload"]["deleted_at"]
    replayed = json.loads(store.run("replay", store.session_id, "--json").stdout)
    assert replayed["deleted"] is True and replayed["window"] == []
    verified = store.run("verify", store.session_id, "--json")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["deleted"] is True
