"""The audit commands on behalf of a user (`--user`), run through typer's test runner.

With `--user`, another user's session is as unknown as a missing one: the same exit status 2 and
the same one-line error, nothing of its content printed; the user's own session reads as it does
without `--user`; `verify --user U` alone checks U's sessions only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result
from sessionledger.domain import AssistantMessage, SessionEvent, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.adk.ids import ledger_session_id
from sessionledger.workers.cli import audit, cli  # noqa: F401  (importing audit registers its commands)
from typer.testing import CliRunner

FIRST_EVENT = "first-question"
SECRET = "bob's passport number is X1234567"


@dataclass
class Ledger:
    url: str
    alice: list[str]
    bob: str

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(cli, [*args, "--database-url", self.url])


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Ledger:
    """Alice has two sessions, Bob one with a secret; every session starts with `first-question`."""
    url = f"sqlite:///{tmp_path_factory.mktemp('isolation') / 'ledger.db'}"
    with open_service(url) as service:

        def session_of(user: str, text: str) -> str:
            session_id = service.create_session(user).id
            service.append_event(
                SessionEvent(id=FIRST_EVENT, session_id=session_id, message=UserMessage(text))
            )
            service.append_message(session_id, AssistantMessage("noted"))
            return session_id

        alice = [session_of("alice", "alice's question"), session_of("alice", "another question")]
        bob = session_of("bob", SECRET)
    return Ledger(url, alice, bob)


COMMANDS = {
    "replay": ("replay", "{session}", "--json"),
    "replay --version": ("replay", "{session}", "--version", "1", "--json"),
    "replay --event": ("replay", "{session}", "--event", FIRST_EVENT, "--json"),
    "export": ("export", "{session}"),
    "timeline": ("timeline", "{session}", "--json"),
    "verify": ("verify", "{session}", "--json"),
    "prove": ("prove", "{session}", FIRST_EVENT),
}


def command(name: str, session_id: str, *user: str) -> list[str]:
    return [part.format(session=session_id) for part in COMMANDS[name]] + list(user)


def error_line(result: Result, session_id: str) -> str:
    """The one error line, with the session id taken out."""
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0].replace(session_id, "<session>")


def without_export_time(output: str) -> str:
    """An export's header says when it was made; the rest must be the same."""
    lines = output.splitlines()
    if lines and lines[0].startswith('{"deleted"'):
        header = json.loads(lines[0])
        header.pop("exported_at")
        lines[0] = json.dumps(header)
    return "\n".join(lines)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_users_own_session_reads_as_without_user(ledger: Ledger, name: str) -> None:
    session_id = ledger.alice[0]
    scoped = ledger.run(*command(name, session_id, "--user", "alice"))
    assert scoped.exit_code == 0, scoped.stderr
    plain = ledger.run(*command(name, session_id))
    assert without_export_time(scoped.stdout) == without_export_time(plain.stdout)
    assert "alice's question" in scoped.stdout or name == "verify"


@pytest.mark.parametrize("name", COMMANDS)
def test_another_users_session_is_as_unknown_as_a_missing_one(ledger: Ledger, name: str) -> None:
    foreign = ledger.run(*command(name, ledger.bob, "--user", "alice"))
    missing = "no-such-session"
    unknown = ledger.run(*command(name, missing, "--user", "alice"))
    assert error_line(foreign, ledger.bob) == error_line(unknown, missing)
    assert foreign.stdout == unknown.stdout == ""
    assert "X1234567" not in foreign.stdout + foreign.stderr
    assert error_line(unknown, missing) == error_line(ledger.run(*command(name, missing)), missing)


@pytest.mark.parametrize("name", COMMANDS)
def test_another_users_adk_session_is_not_named_to_a_user_asking_by_its_short_id(
    tmp_path: Path, name: str
) -> None:
    """Asked for `t1`, the CLI names the ADK session `app/user/t1` it may mean: only the asker's."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        service.create_session("bob", session_id=ledger_session_id("app", "bob", "t1"))
    ledger = Ledger(url, [], "")
    foreign = ledger.run(*command(name, "t1", "--user", "alice"))
    assert error_line(foreign, "t1") == "error: unknown session '<session>'"
    assert "bob" not in foreign.stderr
    assert "app/bob/t1" in ledger.run(*command(name, "t1", "--user", "bob")).stderr


def test_verify_with_a_user_and_no_session_checks_only_that_users_sessions(ledger: Ledger) -> None:
    result = ledger.run("verify", "--user", "alice", "--json")
    assert result.exit_code == 0, result.stderr
    assert [found["session_id"] for found in json.loads(result.stdout)] == ledger.alice
    everyone = ledger.run("verify", "--json")
    assert [found["session_id"] for found in json.loads(everyone.stdout)] == [*ledger.alice, ledger.bob]
    nobody = ledger.run("verify", "--user", "carol", "--json")
    assert nobody.exit_code == 0 and json.loads(nobody.stdout) == []


BAD_INPUT = {
    "replay --at before year 1 in UTC": ("replay", "{session}", "--at", "0001-01-01T00:00:00+14:00"),
    "replay --at after year 9999 in UTC": ("replay", "{session}", "--at", "9999-12-31T23:59:59-14:00"),
    "verify --jobs beyond the machine": ("verify", "{session}", "--jobs", "100000"),
}
"""Issue 25's bad input: refused before any session is read, so it tells nothing about one."""


@pytest.mark.parametrize("args", BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_is_answered_alike_for_own_foreign_and_missing_sessions(ledger: Ledger, args) -> None:
    answers = set()
    for session_id in (ledger.alice[0], ledger.bob, "no-such-session"):
        result = ledger.run(*[part.format(session=session_id) for part in args], "--user", "alice")
        answers.add(error_line(result, session_id))
        assert result.stdout == "" and "X1234567" not in result.stderr
    assert len(answers) == 1, answers
