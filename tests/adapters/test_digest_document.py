"""The digest document: canonical text, one spelling of each hash, and its Ed25519 signature."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionledger.infrastructure.audit.digest import (
    Digest,
    InvalidDigest,
    SessionHead,
    parse_digest,
    read_digest,
    write_digest,
)

HEAD = SessionHead(3, "a" * 64, "b" * 64)
DIGEST = Digest(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), 42, {"s-1": HEAD})


def test_a_digest_reads_back_as_written(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    signed = DIGEST.signed(key)
    write_digest(signed, tmp_path / "d.json")
    again = read_digest(tmp_path / "d.json", key.public_key())
    assert again == signed
    assert parse_digest(DIGEST.to_json()) == DIGEST


def test_a_forged_signature_is_refused() -> None:
    key = Ed25519PrivateKey.generate()
    signed = DIGEST.signed(key)
    altered = replace(signed, sessions={"s-1": replace(HEAD, root="c" * 64)})
    with pytest.raises(InvalidDigest, match="signed with another key, forged, or the digest altered"):
        altered.check_signature(key.public_key())
    by_another = DIGEST.signed(Ed25519PrivateKey.generate())
    with pytest.raises(InvalidDigest, match="does not verify"):
        by_another.check_signature(key.public_key())
    with pytest.raises(InvalidDigest, match="not signed"):
        DIGEST.check_signature(key.public_key())


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("a" * 64, "A" * 64),  # the same hash in capitals
        lambda t: t.replace('"position":3', '"position": 3'),  # not canonical
        lambda t: t.replace('"position":3', '"position":-3'),
        lambda t: t.replace("sessionledger-digest/1", "sessionledger-digest/9"),
        lambda t: t[:-5],
    ],
)
def test_a_malformed_digest_is_refused(edit) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidDigest, match="malformed"):
        parse_digest(edit(DIGEST.to_json()))


def test_a_head_s_global_position_reads_back_and_stays_within_the_digest() -> None:
    placed = replace(DIGEST, sessions={"s-1": replace(HEAD, global_position=40)})
    assert '"global_position":40,"head"' in placed.to_json()
    assert parse_digest(placed.to_json()) == placed
    past = replace(DIGEST, sessions={"s-1": replace(HEAD, global_position=43)})
    with pytest.raises(InvalidDigest, match="past the digest's 42"):
        parse_digest(past.to_json())
    with pytest.raises(InvalidDigest, match="malformed"):
        parse_digest(placed.to_json().replace('"global_position":40', '"global_position":-40'))
