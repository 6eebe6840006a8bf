"""`sessionledger token create|revoke`: the token is the last line, stored hashed, and revoked for good."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sessionledger.domain.access import parse_token, secret_digest
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.settings import Settings

CLI = str(Path(sys.executable).with_name("sessionledger"))


def _run(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "token", *words], capture_output=True, text=True, timeout=60)


def test_create_prints_the_token_last_and_revoke_closes_it_for_good(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    made = _run("create", "--user", "alice", "--admin", "--database-url", url)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    token_id, secret = parse_token(token)
    with open_storage(Settings(database_url=url)) as storage:
        stored = storage.access_tokens.find(token_id)
        assert stored is not None and stored.grant.admin and stored.grant.user_id == "alice"
        assert not stored.grant.write  # the audit page's tokens read only
        assert stored.secret_sha256 == secret_digest(secret) != secret
    assert secret.encode() not in (tmp_path / "ledger.db").read_bytes()  # only its hash is stored
    assert _run("revoke", token, "--database-url", url).returncode == 0
    again = _run("revoke", token, "--database-url", url)
    assert again.returncode == 2 and "revoked already" in again.stderr
    with open_storage(Settings(database_url=url)) as storage:
        assert storage.access_tokens.find(token_id) is None


def test_create_write_makes_a_token_that_writes_its_users_sessions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    made = _run("create", "--user", "bob", "--write", "--database-url", url)
    assert made.returncode == 0, made.stderr
    token_id, _ = parse_token(made.stdout.strip().splitlines()[-1])
    with open_storage(Settings(database_url=url)) as storage:
        stored = storage.access_tokens.find(token_id)
        assert stored is not None and stored.grant.write and not stored.grant.admin


def test_bad_arguments_are_one_line_errors_with_status_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    for words, message in (
        (("create", "--user", " "), "--user must not be empty"),
        (("revoke", "not-a-token"), "not a sessionledger token"),
    ):
        failed = _run(*words, "--database-url", url)
        assert failed.returncode == 2 and message in failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1
