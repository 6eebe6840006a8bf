"""`sessionledger digest` and `verify --digest` as a user runs them, on an embedded SQLite ledger.

Exit status 0 when the ledger extends every digest, 1 when it does not or a digest's signature
does not verify, with one line on stderr naming the session and the position.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service

CLI = str(Path(sys.executable).with_name("sessionledger"))


def run(*args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONLEDGER_")}
    env.update({f"SESSIONLEDGER_{name.upper()}": value for name, value in settings.items()})
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        session_id = service.create_session("alice", app_name="digests").id
        for turn in range(5):
            service.append_message(session_id, UserMessage(f"question {turn}"))
    return url


def keys(tmp_path: Path, name: str) -> tuple[Path, Path]:
    key = Ed25519PrivateKey.generate()
    private, public = tmp_path / f"{name}.pem", tmp_path / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def test_a_signed_digest_verifies_and_a_forged_one_does_not(url: str, tmp_path: Path) -> None:
    private, public = keys(tmp_path, "operator")
    digest = tmp_path / "digest.json"
    made = run("digest", "--output", str(digest), "--sign-key", str(private), "--database-url", url)
    assert made.returncode == 0, made.stderr
    assert "(signed)" in made.stdout
    checked = run("verify", "--digest", str(digest), "--public-key", str(public), "--database-url", url)
    assert checked.returncode == 0, checked.stderr

    forged = json.loads(digest.read_text())
    session = next(iter(forged["sessions"].values()))
    session["position"] -= 1
    digest.write_text(json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n")
    refused = run("verify", "--digest", str(digest), "--public-key", str(public), "--database-url", url)
    assert refused.returncode == 1
    assert "signature" in refused.stderr and "does not verify" in refused.stderr

    _, stranger = keys(tmp_path, "stranger")
    made = run("digest", "--output", str(digest), "--sign-key", str(private), "--database-url", url)
    refused = run("verify", "--digest", str(digest), "--public-key", str(stranger), "--database-url", url)
    assert refused.returncode == 1


def test_a_removed_session_fails_against_its_digest(url: str, tmp_path: Path) -> None:
    digest = tmp_path / "digest.json"
    assert run("digest", "--output", str(digest), "--database-url", url).returncode == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.execute("DELETE FROM window_slots")
        db.execute("DELETE FROM ledger")
        db.execute("DELETE FROM sessions")
    assert run("verify", "--database-url", url).returncode == 0  # nothing left to disagree
    failed = run("verify", "--digest", str(digest), "--database-url", url)
    assert failed.returncode == 1
    assert "removed at position 1" in failed.stderr and "removed since" in failed.stderr


def test_a_proof_checks_without_the_database_and_a_tampered_one_does_not(url: str, tmp_path: Path) -> None:
    digest, proof = tmp_path / "digest.json", tmp_path / "proof.json"
    with open_service(url) as service:
        [session_id] = service.ledger.session_ids()
        event_id = service.records(session_id)[3].event_id or ""
    assert run("digest", "--output", str(digest), "--database-url", url).returncode == 0
    made = run(
        "prove", session_id, event_id, "--digest", str(digest), "--output", str(proof), "--database-url", url
    )
    assert made.returncode == 0, made.stderr
    checked = run("check-proof", str(proof), str(digest))
    assert checked.returncode == 0, checked.stderr
    assert f"event {event_id} at position 4" in checked.stdout

    proof.write_text(proof.read_text().replace("question 2", "question 7"))
    refused = run("check-proof", str(proof), str(digest))
    assert refused.returncode == 1
    assert "record 4: its payload does not match its content hash" in refused.stderr


def test_verify_since_a_digest_and_chain_the_next(url: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert run("digest", "--output", str(first), "--database-url", url).returncode == 0
    with open_service(url) as service:
        [session] = service.list_sessions("alice")
        service.append_message(session.id, UserMessage("since the digest"))
    checked = run("verify", "--since", str(first), "--next-digest", str(second), "--database-url", url)
    assert checked.returncode == 0, checked.stderr
    assert "0 sessions not written to since" in checked.stderr and "1 checked" in checked.stderr
    again = run("verify", "--since", str(second), "--database-url", url)
    assert again.returncode == 0 and "1 sessions not written to since" in again.stderr, again.stderr
    swept = run("verify", "--since", str(second), "--all-heads", "--database-url", url)
    assert swept.returncode == 0 and "1 sessions unchanged since" in swept.stderr, swept.stderr
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.execute("UPDATE ledger SET payload = '{}' WHERE position = 7")
    failed = run("verify", "--since", str(first), "--database-url", url)
    assert failed.returncode == 1
    assert "edited at position 7" in failed.stderr


def test_all_heads_goes_with_since(url: str) -> None:
    refused = run("verify", "--all-heads", "--database-url", url)
    assert refused.returncode != 0 and "--all-heads goes with --since" in refused.stderr


def test_verify_with_jobs(url: str) -> None:
    assert run("verify", "--jobs", "2", "--database-url", url).returncode == 0
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.execute("UPDATE ledger SET payload = '{}' WHERE position = 3")
    failed = run("verify", "--jobs", "2", "--database-url", url)
    assert failed.returncode == 1 and "edited at position 3" in failed.stderr, failed.stderr


def test_keygen_makes_a_pair_that_signs_and_verifies_and_never_overwrites(url: str, tmp_path: Path) -> None:
    private = tmp_path / "keys" / "operator.pem"
    private.parent.mkdir()
    made = run("keygen", "--out", str(private))
    assert made.returncode == 0, made.stderr
    public = private.with_name("operator.pem.pub")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert public.read_text() in made.stdout and "BEGIN PUBLIC KEY" in made.stdout
    assert "PRIVATE" not in made.stdout

    digest = tmp_path / "digest.json"
    assert (
        run("digest", "--output", str(digest), "--sign-key", str(private), "--database-url", url).returncode
        == 0
    )
    checked = run("verify", "--digest", str(digest), "--public-key", str(public), "--database-url", url)
    assert checked.returncode == 0, checked.stderr

    before = private.read_bytes()
    again = run("keygen", "--out", str(private))
    assert (
        again.returncode == 2
        and again.stderr.strip() == f"error: {private} exists: a key is never overwritten"
    )
    assert private.read_bytes() == before
    private.rename(private.with_name("moved.pem"))
    kept = run("keygen", "--out", str(private))  # its public key is still there: refused too
    assert kept.returncode == 2 and not private.exists()


def test_the_trusted_key_setting_refuses_a_digest_signed_by_another_key(url: str, tmp_path: Path) -> None:
    private, public = keys(tmp_path, "operator")
    attacker, _ = keys(tmp_path, "attacker")
    ours, theirs, unsigned = tmp_path / "ours.json", tmp_path / "theirs.json", tmp_path / "unsigned.json"
    for key, path in ((private, ours), (attacker, theirs)):
        assert (
            run("digest", "--output", str(path), "--sign-key", str(key), "--database-url", url).returncode
            == 0
        )
    assert run("digest", "--output", str(unsigned), "--database-url", url).returncode == 0

    for trusted in (str(public), public.read_text()):  # the PEM file's path, or the PEM itself
        passed = run("verify", "--digest", str(ours), "--database-url", url, digest_public_key=trusted)
        assert passed.returncode == 0, passed.stderr
        refused = run("verify", "--digest", str(theirs), "--database-url", url, digest_public_key=trusted)
        assert refused.returncode == 1
        assert (
            f"the signature of digest {theirs} does not verify with the trusted public key" in refused.stderr
        )
        not_signed = run(
            "verify", "--digest", str(unsigned), "--database-url", url, digest_public_key=trusted
        )
        assert not_signed.returncode == 1 and f"digest {unsigned} is not signed" in not_signed.stderr
    since = run("verify", "--since", str(theirs), "--database-url", url, digest_public_key=str(public))
    assert since.returncode == 1 and "does not verify" in since.stderr

    # no trusted key: a signature that nobody checks vouches for nothing, and the output says so
    for signed in (ours, theirs):
        unchecked = run("verify", "--digest", str(signed), "--database-url", url)
        assert unchecked.returncode == 1
        assert (
            "its signature was not checked: no trusted key (set SESSIONLEDGER_DIGEST_PUBLIC_KEY"
            in unchecked.stderr
        )
    plain = run("verify", "--digest", str(unsigned), "--database-url", url)
    assert plain.returncode == 0, plain.stderr
    assert f"digest {unsigned} is not signed: no signature was checked" in plain.stderr


DEEP = "[" * 100_000 + "\n"
"""JSON nested deeper than any parser goes (issue 25: a `RecursionError` traceback)."""


def test_deeply_nested_json_files_are_one_line_refusals(url: str, tmp_path: Path) -> None:
    """A digest or proof nested too deeply is a malformed one: one line, exit 1 as for any other
    malformed digest or proof (they do not check); an import line likewise, exit 2."""
    digest, deep = tmp_path / "digest.json", tmp_path / "deep.json"
    deep.write_text(DEEP)
    assert run("digest", "--output", str(digest), "--database-url", url).returncode == 0
    for args, status in [
        (("verify", "--digest", str(deep), "--database-url", url), 1),
        (("check-proof", str(deep), str(digest)), 1),
        (("check-proof", str(digest), str(deep)), 1),
        (("import", str(deep), "--database-url", url), 2),
    ]:
        result = run(*args)
        assert result.returncode == status, (args, result.stderr)
        # an unsigned digest adds its "note:" line; the refusal itself is one line
        [line] = [line for line in result.stderr.splitlines() if not line.startswith("note: ")]
        assert line.startswith("error: ") and "nested too deeply" in line, line
