"""The `AccessTokens` contract (the audit page's tokens), run on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from sessionledger.domain.access import Grant, issue, parse_token
from sessionledger.infrastructure.bootstrap import Storage

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_a_token_is_found_by_its_id_and_accepts_only_its_own_secret(storage: Storage) -> None:
    token, stored = issue(Grant("alice"), NOW)
    storage.access_tokens.add(stored)
    token_id, secret = parse_token(token)
    found = storage.access_tokens.find(token_id)
    assert found is not None and found.grant == Grant("alice", admin=False)
    assert found.accepts(secret)
    assert not found.accepts(secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert secret not in found.secret_sha256  # only the hash is kept
    assert storage.access_tokens.find("0" * 16) is None


def test_an_admin_grant_reads_for_no_one_in_particular(storage: Storage) -> None:
    _, stored = issue(Grant("root", admin=True), NOW)
    storage.access_tokens.add(stored)
    found = storage.access_tokens.find(stored.token_id)
    assert found is not None and found.grant.admin and found.grant.reader is None
    assert Grant("alice").reader == "alice"


def test_a_revoked_token_is_never_found_again_and_revoking_twice_says_so(storage: Storage) -> None:
    _, kept = issue(Grant("alice"), NOW)
    _, revoked = issue(Grant("alice"), NOW)
    storage.access_tokens.add(kept)
    storage.access_tokens.add(revoked)
    assert storage.access_tokens.revoke(revoked.token_id)
    assert storage.access_tokens.find(revoked.token_id) is None
    assert not storage.access_tokens.revoke(revoked.token_id)
    assert not storage.access_tokens.revoke("f" * 16)
    assert storage.access_tokens.find(kept.token_id) == kept


def test_tokens_survive_a_restart(storage: Storage, reopen: Callable[[], Storage]) -> None:
    _, stored = issue(Grant("bob", admin=True), NOW)
    storage.access_tokens.add(stored)
    assert reopen().access_tokens.find(stored.token_id) == stored


@pytest.mark.parametrize(
    "text",
    [
        "",
        "sl_",
        "sl_abc_secret",
        "xx_0123456789abcdef_secret",
        "sl_0123456789ABCDEF_s",
        "sl_0123456789abcdef_",
    ],
)
def test_text_that_is_not_a_token_is_a_value_error_that_does_not_echo_it(text: str) -> None:
    with pytest.raises(ValueError, match="not a sessionledger token") as raised:
        parse_token(text)
    assert len(text) <= len("sl_") or text not in str(raised.value)


def test_a_token_needs_a_user() -> None:
    with pytest.raises(ValueError, match="user must not be empty"):
        issue(Grant(" "), NOW)
