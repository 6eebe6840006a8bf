"""Proofs for one reply: made from the ledger, checked against a digest with no database.

Every event of a session with appends, a compaction with a summary and a rewind has a proof that
checks and shows the window `replay --event` computes; a tampered event, a proof against the
wrong digest, and any single flipped byte of a proof are rejected with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessionledger.domain import UserMessage
from sessionledger.domain.hashing import canonical, sha256_hex
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import what_the_model_saw
from sessionledger.infrastructure.audit.digest import Digest, take_digest
from sessionledger.infrastructure.audit.proof import InvalidProof, check_proof, make_proof

from tests.integration.test_tamper import build_session


@pytest.fixture(scope="module")
def session() -> Iterator[tuple[SessionService, str]]:
    with open_service("memory://") as service:
        yield service, build_session(service)


def event_ids(service: SessionService, session_id: str) -> list[str]:
    return [r.event_id or "" for r in service.records(session_id) if r.kind is Kind.EVENT]


def test_every_event_has_a_proof_that_shows_what_the_model_saw(session: tuple[SessionService, str]) -> None:
    service, session_id = session
    digest = take_digest(service.ledger)
    records = service.records(session_id)
    for event_id in event_ids(service, session_id):
        checked = check_proof(make_proof(records, event_id), digest)
        assert checked.event.event_id == event_id
        saw = what_the_model_saw(service, session_id, event_id)
        assert tuple(r.position for r in checked.window) == saw.before.positions
        assert [r.event() for r in checked.window] == list(saw.before.window)


def test_a_tampered_event_is_rejected(session: tuple[SessionService, str]) -> None:
    service, session_id = session
    digest = take_digest(service.ledger)
    records = service.records(session_id)
    target = records[-1]
    payload = {**(target.payload or {}), "message": {**(target.payload or {})["message"], "text": "forged"}}
    # the payload alone changed: its content hash no longer matches
    forged = [*records[:-1], replace(target, payload=payload)]
    with pytest.raises(InvalidProof, match="does not match its content hash"):
        check_proof(make_proof(forged, target.event_id or ""), digest)
    # the content hash recomputed too: the record no longer hashes to a leaf of the digest's tree
    content = sha256_hex(canonical(payload))
    rehashed = [*records[:-1], replace(target, payload=payload, content_hash=content)]
    with pytest.raises(InvalidProof, match="is not in the ledger the digest commits to"):
        check_proof(make_proof(rehashed, target.event_id or ""), digest)
    # and its row hash: the tree is another one, with another root than the digest's
    rehashed[-1] = replace(rehashed[-1], row_hash=sha256_hex("forged"))
    with pytest.raises(InvalidProof, match="another root"):
        check_proof(make_proof(rehashed, target.event_id or ""), digest)


def test_a_proof_against_the_wrong_digest_is_rejected(session: tuple[SessionService, str]) -> None:
    service, session_id = session
    old = take_digest(service.ledger)
    event_id = event_ids(service, session_id)[0]
    service.append_message(session_id, UserMessage("later"))
    proof = make_proof(service.records(session_id), event_id)
    with pytest.raises(InvalidProof, match="make the proof against this digest"):
        check_proof(proof, old)
    other = Digest(old.taken_at, 0, {})
    with pytest.raises(InvalidProof, match="the wrong digest"):
        check_proof(proof, other)
    assert check_proof(proof, take_digest(service.ledger)).event.event_id == event_id


def test_a_proof_of_an_older_digest_checks_against_it(session: tuple[SessionService, str]) -> None:
    service, session_id = session
    digest = take_digest(service.ledger)
    service.append_message(session_id, UserMessage("after the digest"))
    size = digest.sessions[session_id].position
    proof = make_proof(service.records(session_id), event_ids(service, session_id)[2], size)
    assert check_proof(proof, digest)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_no_single_flipped_byte_of_a_proof_checks(
    session: tuple[SessionService, str], data: st.DataObject
) -> None:
    service, session_id = session
    digest = take_digest(service.ledger)
    ids = event_ids(service, session_id)
    proof = make_proof(service.records(session_id), data.draw(st.sampled_from(ids))).encode()
    where = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
    bit = data.draw(st.integers(min_value=0, max_value=7))
    flipped = bytearray(proof)
    flipped[where] ^= 1 << bit
    try:
        text = flipped.decode("utf-8")
    except UnicodeDecodeError:
        return  # not even text: check-proof cannot read it
    with pytest.raises(InvalidProof):
        check_proof(text, digest)
