"""What the browsing commands show (issue 24): every user's sessions without `--user`, each event's
id, times that `--at` takes back, and the name to use for an ADK session's id."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.domain.compaction import SlidingWindowStrategy
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.adk.ids import ledger_session_id

from tests.fakes.compaction import Always

CLI = str(Path(sys.executable).with_name("sessionledger"))
ADK_ID = "c17de25a-4b8e-4f0e-9a8b-2f8e0c1d9e11"


def run(url: str, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    env["COLUMNS"] = str(columns)
    return subprocess.run(
        [CLI, *args, "--database-url", url], env=env, capture_output=True, text=True, timeout=120
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, list[str]]:
    """Three users' sessions, created in this order; the last one google-adk's, named app/user/id."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        ids = [service.create_session(user, app_name="app").id for user in ("alice", "bob", "alice")]
        adk = ledger_session_id("myapp", "carol", ADK_ID)
        ids.append(service.create_session("carol", app_name="myapp", session_id=adk).id)
        for text in ("one", "two", "three"):
            service.append_message(ids[0], UserMessage(text))
            service.append_message(ids[0], AssistantMessage(text=f"re: {text}"))
        service.compact(ids[0], Always(), SlidingWindowStrategy(max_events=2))
    return url, ids


def test_sessions_without_user_lists_every_users_newest_first_by_page(ledger: tuple[str, list[str]]) -> None:
    url, ids = ledger
    every = json.loads(run(url, "sessions", "--json").stdout)
    assert [s["id"] for s in every] == ids[::-1]
    assert [s["user_id"] for s in every] == ["carol", "alice", "bob", "alice"]
    pages = [json.loads(run(url, "sessions", "--limit", "3", "--page", p, "--json").stdout) for p in "12"]
    assert [[s["id"] for s in page] for page in pages] == [ids[:0:-1], ids[:1]]
    table = run(url, "sessions", "--limit", "3")
    assert table.returncode == 0, table.stderr
    assert "user" in table.stdout and "bob" in table.stdout and "--page 2" in table.stdout
    mine = json.loads(run(url, "sessions", "--user", "alice", "--json").stdout)
    assert [s["id"] for s in mine] == [ids[0], ids[2]], "--user: that user's, oldest first, as before"
    assert "without --user" in one_line_error(run(url, "sessions", "--user", "alice", "--page", "2"))


def test_events_shows_each_events_id_whole(ledger: tuple[str, list[str]]) -> None:
    url, ids = ledger
    listed = json.loads(run(url, "events", ids[0], "--all", "--json").stdout)
    shown = run(url, "events", ids[0], "--all")
    assert shown.returncode == 0, shown.stderr
    assert len(listed) == 6 and all(event["id"] in shown.stdout for event in listed)


@pytest.mark.parametrize("columns", [200, 80])  # a wide terminal, and the 80 columns of a plain one
def test_timeline_prints_times_with_their_zone_that_replay_at_takes(
    ledger: tuple[str, list[str]], columns: int
) -> None:
    url, ids = ledger
    shown = run(url, "timeline", ids[0], columns=columns)
    assert shown.returncode == 0, shown.stderr
    rows = re.findall(r"│\s*(\d+)\s*│\s*(\d+)\s*│\s*\S+\s*│\s*(\S+)\s*│", shown.stdout)
    entries = json.loads(run(url, "timeline", ids[0], "--json").stdout)
    assert len(rows) == len(entries) > 5
    latest: dict[str, int] = {}  # what replay --at a printed time stops at: every record recorded by then
    for _, version, printed in rows:
        assert printed.endswith("Z"), printed
        latest[printed] = max(latest.get(printed, 0), int(version))
    for printed in sorted(latest)[1::3]:
        replayed = run(url, "replay", ids[0], "--at", printed, "--json")
        assert replayed.returncode == 0, replayed.stderr
        assert json.loads(replayed.stdout)["version"] == latest[printed]


@pytest.mark.parametrize(
    "command", [["events"], ["timeline"], ["export"], ["replay"], ["verify"], ["prove", "an-event"]], ids=str
)
def test_an_adk_session_id_alone_points_to_its_ledger_name(
    ledger: tuple[str, list[str]], command: list[str]
) -> None:
    url, ids = ledger
    hint = f"unknown session {ADK_ID!r}: an ADK session is named app/user/id, e.g. {ids[3]!r}"
    assert one_line_error(run(url, command[0], ADK_ID, *command[1:])) == f"error: {hint}"
    if command[0] in ("events", "timeline"):  # the same helper speaks for every command's --user
        assert one_line_error(run(url, command[0], ADK_ID, "--user", "carol")) == f"error: {hint}"
        other = one_line_error(run(url, command[0], ADK_ID, "--user", "bob"))
        assert "myapp" not in other and "carol" not in other, "another user's session is not named"


MARKUP = "<s>[INST] 2+2? [/INST] approved[black on black] -- denied[/black on black]"
ESCAPES = "\x1b[2J\x1b[8mhidden\x1b[0m shown\x07"


def test_stored_text_is_shown_as_it_is_never_as_markup_or_terminal_codes(tmp_path: Path) -> None:
    """A message, a user or a session id is data: `[/INST]` is no markup tag to fail on or to
    apply, and an escape sequence (which could clear or hide the operator's screen) is shown."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        service.create_session("[/x]", session_id="[/x]")
        service.append_message("[/x]", UserMessage(MARKUP))
        service.append_message("[/x]", UserMessage(ESCAPES))
    shown_escapes = "\\x1b[2J\\x1b[8mhidden\\x1b[0m shown\\x07"
    for command in (["events", "[/x]"], ["timeline", "[/x]"], ["replay", "[/x]"]):
        result = run(url, *command, columns=400)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert MARKUP in result.stdout and shown_escapes in result.stdout, result.stdout
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    for command in (["sessions"], ["sessions", "--user", "[/x]"], ["verify"]):
        result = run(url, *command)
        assert result.returncode == 0 and "[/x]" in result.stdout, result.stderr


def test_an_event_the_session_lacks_is_named_in_whole(ledger: tuple[str, list[str]]) -> None:
    url, ids = ledger
    line = one_line_error(run(url, "replay", ids[0], "--event", "nosuch"))
    assert line.endswith(f"'nosuch' is not in the ledger of session '{ids[0]}'"), line
    line = one_line_error(run(url, "prove", ids[0], "nosuch"))
    assert line.endswith("'nosuch' is not among the first 8 records of the session"), line


@pytest.mark.parametrize(
    "paging", [["--page", str(2**64)], ["--limit", str(2**64)], ["--page", str(2**62), "--limit", "3"]]
)
def test_a_page_past_every_backends_integers_is_a_one_line_error(
    ledger: tuple[str, list[str]], paging: list[str]
) -> None:
    assert one_line_error(run(ledger[0], "sessions", *paging)).endswith("starts past 2**63 - 1 sessions")


def test_a_row_changed_outside_the_ledger_is_one_line_for_the_reading_commands(tmp_path: Path) -> None:
    """The auditor reads what is wrong and where to look, not a `KeyError` traceback, nor an
    "unknown session" for one that exists."""
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        session_id = service.create_session("alice").id
        service.append_message(session_id, UserMessage("hello"))
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # SQLite has no ledger_guard trigger to refuse it
        conn.exec_driver_sql(
            "UPDATE ledger SET payload = json_remove(payload, '$.message') WHERE position = 2"
        )
    engine.dispose()
    for command in ("events", "timeline", "replay"):
        line = one_line_error(run(url, command, session_id))
        assert line.endswith("its row was changed outside the ledger; `sessionledger verify` names where"), (
            line
        )
