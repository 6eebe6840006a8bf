"""Verifying against digests kept outside the database, on PostgreSQL and SQLite.

The attacks are a superuser's (the `ledger_guard` trigger off, as in tests/integration/test_tamper.py):
a payload rewritten with every later hash and the session head recomputed passes the chain check,
and only a digest taken before catches it; so with a truncated or a removed session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sessionledger.domain import UserMessage
from sessionledger.domain.hashing import GENESIS_HASH, canonical, row_hash, sha256_hex
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.audit.anchored import Anchor, verify_against
from sessionledger.infrastructure.audit.digest import Digest, take_digest

from tests.conftest import SQL_BACKENDS
from tests.integration.test_tamper import Ledger, open_ledger


@pytest.fixture(params=SQL_BACKENDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """A fresh database each: a digest covers every session of the ledger."""
    yield from open_ledger(request, shared=False)


def rewrite(ledger: Ledger, position: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the payload at `position` and recompute every hash after it and the session head:
    what someone with write access to the database can do."""
    records = ledger.records()
    prev = GENESIS_HASH if position == 1 else records[position - 2].row_hash
    for record in records[position - 1 :]:
        payload = None if record.payload is None else dict(record.payload)
        content = record.content_hash
        if record.position == position and payload is not None:
            change(payload)
            content = sha256_hex(canonical(payload))
        new_hash = row_hash(
            prev,
            record.session_id,
            record.position,
            record.version,
            record.event_id,
            record.kind,
            record.occurred_at,
            content,
        )
        ledger.sql(
            f"UPDATE ledger SET payload = {ledger.json('t')}, content_hash = :c, prev_hash = :prev,"
            " row_hash = :h WHERE session_id = :sid AND position = :p",
            t=None if payload is None else canonical(payload),
            c=content,
            prev=prev,
            h=new_hash,
            p=record.position,
        )
        prev = new_hash
    ledger.sql("UPDATE sessions SET head_hash = :h WHERE id = :sid", h=prev)


def findings(ledger: Ledger, *digests: Digest) -> list[tuple[str, int | None, str]]:
    results = {r.session_id: r for r in verify_against(ledger.service, digests)}
    return [(str(f.kind), f.position, f.detail) for f in results[ledger.session_id].findings]


def test_an_untouched_ledger_extends_its_digests(ledger: Ledger) -> None:
    first = take_digest(ledger.service.ledger)
    ledger.service.append_message(ledger.session_id, UserMessage("one more"))
    results = list(verify_against(ledger.service, (first, take_digest(ledger.service.ledger))))
    assert [r.session_id for r in results] == [ledger.session_id]
    assert all(r.ok for r in results), [r.findings for r in results]


def test_the_consistent_rewrite_passes_the_chain_but_not_the_digest(ledger: Ledger) -> None:
    """The session's owner changed in its created record, every hash after it recomputed."""
    digest = take_digest(ledger.service.ledger)
    last = ledger.last()

    def new_owner(payload: dict[str, Any]) -> None:
        payload["user_id"] = "mallory"

    rewrite(ledger, 1, new_owner)
    ledger.sql("UPDATE sessions SET user_id = 'mallory' WHERE id = :sid")
    assert verify(ledger.service, ledger.session_id).ok  # the chain alone is fooled
    [(kind, position, detail)] = findings(ledger, digest)
    assert (kind, position) == (Anchor.REWRITTEN, 1)
    assert f"records 1..{last}" in detail


def test_two_digests_name_the_rewritten_position(ledger: Ledger) -> None:
    before = take_digest(ledger.service.ledger)
    ledger.service.append_message(ledger.session_id, UserMessage("what I said"))
    after = take_digest(ledger.service.ledger)
    p = ledger.last()

    def reword(payload: dict[str, Any]) -> None:
        payload["message"] = {**payload["message"], "text": "what U said"}  # as long: the stats agree

    rewrite(ledger, p, reword)
    assert verify(ledger.service, ledger.session_id).ok
    [(kind, position, detail)] = findings(ledger, after, before)
    assert (kind, position) == (Anchor.REWRITTEN, p)
    assert f"records {p}..{p} " in detail


def test_a_truncated_session(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    last = ledger.last()
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid AND position > :p", p=last - 2)
    kinds = {(kind, position) for kind, position, _ in findings(ledger, digest)}
    assert (Anchor.TRUNCATED, last - 1) in kinds


def test_a_removed_session(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid")
    ledger.sql("DELETE FROM window_slots WHERE session_id = :sid")
    ledger.sql("DELETE FROM sessions WHERE id = :sid")
    [(kind, position, detail)] = findings(ledger, digest)
    assert (kind, position) == (Anchor.REMOVED, 1)
    assert "removed since" in detail


def test_erasure_for_privacy_keeps_verifying(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    ledger.service.delete_session(ledger.session_id)
    assert findings(ledger, digest) == []
