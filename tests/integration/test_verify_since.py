"""`verify --since`: only what was appended after a trusted digest, and its link to it, on
PostgreSQL, SQLite and memory; each way the link can break is named with its position."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit.anchored import Anchor, verify_against
from sessionledger.infrastructure.audit.digest import (
    Digest,
    InvalidDigest,
    parse_digest,
    read_digest,
    take_digest,
)
from sessionledger.infrastructure.audit.since import (
    BrokenLink,
    digest_since,
    verify_session_since,
    verify_since,
)
from sessionledger.workers import relay

from tests.conftest import SQL_BACKENDS
from tests.integration.test_digests import rewrite
from tests.integration.test_tamper import Ledger, build_session, open_ledger


@pytest.fixture(params=SQL_BACKENDS)
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    yield from open_ledger(request, shared=False)


def found(ledger: Ledger, digest: Digest, *, all_heads: bool = False) -> list[tuple[str, int | None]]:
    """The session's findings, which the audit page's one-session form finds alike."""
    checked = verify_since(ledger.service.ledger, digest, all_heads=all_heads)
    [result] = [r for r in checked.results if r.session_id == ledger.session_id]
    alone = verify_session_since(ledger.service.ledger, digest, ledger.session_id)
    same = (alone.findings, alone.records, alone.head_hash, alone.version)
    assert same == (result.findings, result.records, result.head_hash, result.version)
    return [(str(f.kind), f.position) for f in result.findings]


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_only_sessions_written_to_since_are_checked(url: str, sqlite_url: str) -> None:
    with open_service(sqlite_url if url == "sqlite" else url) as service:
        quiet, busy = build_session(service), build_session(service)
        digest = take_digest(service.ledger)
        service.append_message(busy, UserMessage("since the digest"))
        fresh = service.create_session("newcomer").id
        service.append_message(fresh, UserMessage("hello"))
        checked = verify_since(service.ledger, digest)
        assert checked.ok, checked.results
        assert {r.session_id for r in checked.results} == {busy, fresh}
        assert checked.unchanged == 1 and quiet in checked.next_digest.sessions
        today = take_digest(service.ledger)
        assert checked.next_digest.sessions == today.sessions  # the resumed trees are today's
        assert checked.next_digest.global_position == today.global_position
        assert verify_since(service.ledger, checked.next_digest).results == ()


def test_a_rewrite_behind_the_digest_breaks_the_link(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    head = digest.sessions[ledger.session_id].position
    ledger.service.append_message(ledger.session_id, UserMessage("since"))
    rewrite(ledger, 1, lambda payload: payload.update(user_id="mallory"))
    assert found(ledger, digest) == [(Anchor.REWRITTEN, head)]


@pytest.mark.parametrize("session_row", ["rewritten too", "left as it was"])
def test_a_rewrite_in_a_session_nobody_wrote_to_since_is_caught_by_all_heads(
    ledger: Ledger, session_row: str
) -> None:
    """Why `all_heads` looks up every head the digest holds: a session untouched since the digest
    has nothing else that could show it was rewritten, whether the session row was made to name
    the new head or not."""
    digest = take_digest(ledger.service.ledger)
    head = digest.sessions[ledger.session_id]
    rewrite(ledger, 1, lambda payload: payload.update(user_id="mallory"))
    if session_row == "left as it was":
        ledger.sql("UPDATE sessions SET head_hash = :h WHERE id = :sid", h=head.head)
    assert found(ledger, digest, all_heads=True) == [(Anchor.REWRITTEN, head.position)]
    swept = verify_since(ledger.service.ledger, digest, all_heads=True)
    assert swept.all_heads and swept.unchanged == len(digest.sessions) - 1


def test_a_session_nobody_wrote_to_since_is_carried_as_the_digest_holds_it(ledger: Ledger) -> None:
    """Without `all_heads` such a rewrite is not looked for, and not vouched for either: the next
    digest carries the trusted head, so a check against it finds the rewrite."""
    digest = take_digest(ledger.service.ledger)
    head = digest.sessions[ledger.session_id]
    rewrite(ledger, 1, lambda payload: payload.update(user_id="mallory"))
    checked = verify_since(ledger.service.ledger, digest)
    assert checked.ok and checked.results == () and not checked.all_heads
    assert checked.unchanged == len(digest.sessions)
    assert checked.next_digest.sessions[ledger.session_id] == head
    assert take_digest(ledger.service.ledger).sessions[ledger.session_id] != head
    [against] = [
        r for r in verify_against(ledger.service, [checked.next_digest]) if r.session_id == ledger.session_id
    ]
    assert Anchor.REWRITTEN in [f.kind for f in against.findings]


def test_an_edit_since_the_digest_is_named(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    ledger.service.append_message(ledger.session_id, UserMessage("since"))
    ledger.service.append_message(ledger.session_id, UserMessage("and again"))
    edited = ledger.last() - 1
    ledger.sql(
        f"UPDATE ledger SET payload = {ledger.json('t')} WHERE session_id = :sid AND position = :p",
        t='{"forged":true}',
        p=edited,
    )
    assert found(ledger, digest) == [("edited", edited)]


def test_records_deleted_since_the_digest(ledger: Ledger) -> None:
    ledger.service.append_message(ledger.session_id, UserMessage("before"))
    digest = take_digest(ledger.service.ledger)
    last = ledger.last()
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid AND position > :p", p=last - 3)
    assert found(ledger, digest, all_heads=True) == [(Anchor.TRUNCATED, last - 2)]
    for table, column in (("ledger", "session_id"), ("window_slots", "session_id"), ("sessions", "id")):
        ledger.sql(f"DELETE FROM {table} WHERE {column} = :sid")
    assert found(ledger, digest, all_heads=True) == [(Anchor.REMOVED, 1)]


def test_new_rows_the_session_head_does_not_reach(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    ledger.service.append_message(ledger.session_id, UserMessage("since"))
    last = ledger.last()
    ledger.sql("UPDATE sessions SET head_position = :p WHERE id = :sid", p=last - 1)
    assert found(ledger, digest) == [("inserted", last)]


def test_a_digest_without_peaks_cannot_anchor_since(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    older = replace(
        digest, sessions={sid: replace(head, peaks=None) for sid, head in digest.sessions.items()}
    )
    assert parse_digest(older.to_json()) == older  # an older release's digest still reads
    with pytest.raises(InvalidDigest, match="no Merkle peaks"):
        verify_since(ledger.service.ledger, older, all_heads=True)
    assert verify_since(ledger.service.ledger, older).ok  # no tree to resume: nobody wrote since
    ledger.service.append_message(ledger.session_id, UserMessage("since"))
    with pytest.raises(InvalidDigest, match="no Merkle peaks"):
        verify_since(ledger.service.ledger, older)


def test_peaks_that_do_not_fold_to_the_root_are_refused(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    head = digest.sessions[ledger.session_id]
    assert head.peaks
    forged = replace(head, peaks=("0" * 64, *head.peaks[1:]))
    text = replace(digest, sessions={ledger.session_id: forged}).to_json()
    with pytest.raises(InvalidDigest, match="do not fold to its root"):
        parse_digest(text)


def without_global_positions(digest: Digest) -> Digest:
    """The digest as an older release wrote it: no head's global position."""
    return replace(
        digest, sessions={sid: replace(head, global_position=None) for sid, head in digest.sessions.items()}
    )


def test_a_digest_records_each_head_s_global_position(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    assert digest.sessions[ledger.session_id].global_position == ledger.records()[-1].global_position
    ledger.service.append_message(ledger.session_id, UserMessage("since"))
    following = verify_since(ledger.service.ledger, digest).next_digest
    assert following.sessions == take_digest(ledger.service.ledger).sessions


def test_a_digest_without_global_positions_still_anchors_since(ledger: Ledger) -> None:
    digest = without_global_positions(take_digest(ledger.service.ledger))
    assert parse_digest(digest.to_json()) == digest  # an older release's digest still reads
    head = digest.sessions[ledger.session_id].position
    ledger.service.append_message(ledger.session_id, UserMessage("since"))
    checked = verify_since(ledger.service.ledger, digest)
    assert checked.ok, checked.results
    last = ledger.records()[-1]
    assert checked.next_digest.sessions[ledger.session_id].global_position == last.global_position
    rewrite(ledger, 1, lambda payload: payload.update(user_id="mallory"))
    assert found(ledger, digest) == [(Anchor.REWRITTEN, head)]


def test_a_wrong_global_position_costs_a_lookup_not_a_finding(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    head = digest.sessions[ledger.session_id]
    first = ledger.records()[0].global_position  # the session's own record, at another position
    for wrong in (first, digest.global_position + 1_000):  # another row; no row at all
        misplaced = replace(digest, sessions={ledger.session_id: replace(head, global_position=wrong)})
        assert verify_since(ledger.service.ledger, misplaced, all_heads=True).ok
    ledger.sql("DELETE FROM ledger WHERE session_id = :sid AND position > :p", p=head.position - 2)
    assert found(ledger, misplaced, all_heads=True) == [(Anchor.TRUNCATED, head.position - 1)]


def test_a_head_moved_to_another_session_is_gone_from_its_own(ledger: Ledger) -> None:
    digest = take_digest(ledger.service.ledger)
    head = digest.sessions[ledger.session_id]
    other = ledger.service.create_session("bystander").id
    ledger.sql(
        "UPDATE ledger SET session_id = :other WHERE session_id = :sid AND position = :p",
        other=other,
        p=head.position,
    )
    assert found(ledger, digest, all_heads=True) == [(Anchor.TRUNCATED, head.position)]


def test_a_digest_resumed_from_the_last_is_the_whole_ledger_s(ledger: Ledger) -> None:
    first = take_digest(ledger.service.ledger)
    ledger.service.append_message(ledger.session_id, UserMessage("since"))
    fresh = ledger.service.create_session("newcomer").id
    ledger.service.append_message(fresh, UserMessage("hello"))
    resumed = digest_since(ledger.service.ledger, first, now=first.taken_at)
    assert resumed == take_digest(ledger.service.ledger, now=first.taken_at)


@pytest.mark.parametrize("found_by", ["a write since", "all heads"])
def test_no_digest_is_resumed_from_one_the_ledger_no_longer_extends(ledger: Ledger, found_by: str) -> None:
    first = take_digest(ledger.service.ledger)
    rewrite(ledger, 1, lambda payload: payload.update(user_id="mallory"))
    if found_by == "a write since":
        ledger.service.append_message(ledger.session_id, UserMessage("since"))
    with pytest.raises(BrokenLink, match="no longer extends") as broken:
        digest_since(ledger.service.ledger, first, all_heads=found_by == "all heads")
    assert [r.session_id for r in broken.value.check.results] == [ledger.session_id]


def test_scheduled_digests_resume_from_the_last_and_stop_at_a_rewrite(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    whole: list[Digest] = []

    def counted(*args: object, **kwargs: object) -> Digest:
        whole.append(take_digest(*args, **kwargs))  # type: ignore[arg-type]
        return whole[-1]

    monkeypatch.setattr(relay, "take_digest", counted)
    digests = tmp_path / "digests"
    digests.mkdir()
    schedule = relay.DigestSchedule(ledger.service.ledger, digests, every=0)
    schedule.due()
    ledger.service.append_message(ledger.session_id, UserMessage("between two digests"))
    schedule.due()
    first, second = sorted(digests.iterdir())
    assert len(whole) == 1  # the second was resumed from the first
    assert parse_digest(second.read_text()).sessions == take_digest(ledger.service.ledger).sessions
    rewrite(ledger, 1, lambda payload: payload.update(user_id="mallory"))
    ledger.service.append_message(ledger.session_id, UserMessage("after the rewrite"))
    with caplog.at_level(logging.ERROR, logger=relay.log.name):
        schedule.due()
    assert sorted(digests.iterdir()) == [first, second]
    assert [r.getMessage() for r in caplog.records] == ["digest withheld"]


def test_a_relay_resumes_from_the_newest_digest_its_directory_holds(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A restarted relay goes on from the last digest written, not from a whole digest of whatever
    the ledger holds then; a newest file that is not a digest of ours stops it, loudly."""
    digests = tmp_path / "digests"
    digests.mkdir()
    key = Ed25519PrivateKey.generate()
    relay.DigestSchedule(ledger.service.ledger, digests, every=0, key=key).due()
    ledger.service.append_message(ledger.session_id, UserMessage("while the relay was down"))
    whole: list[Digest] = []
    monkeypatch.setattr(relay, "take_digest", lambda *a, **k: whole.append(take_digest(*a, **k)) or whole[-1])
    relay.DigestSchedule(ledger.service.ledger, digests, every=0, key=key).due()
    first, second = sorted(digests.iterdir())
    assert whole == []  # resumed from the first
    resumed = read_digest(second, key.public_key())
    assert resumed.sessions == take_digest(ledger.service.ledger).sessions

    rewrite(ledger, 1, lambda payload: payload.update(user_id="mallory"))
    ledger.service.append_message(ledger.session_id, UserMessage("after the rewrite"))
    forged = digests / "digest-forged.json"
    with caplog.at_level(logging.ERROR, logger=relay.log.name):
        relay.DigestSchedule(ledger.service.ledger, digests, every=0, key=key).due()  # no longer extended
        forged.write_text(second.read_text().replace('"position"', '"Position"'))
        relay.DigestSchedule(ledger.service.ledger, digests, every=0, key=key).due()  # not a digest
        forged.unlink()
        other = Ed25519PrivateKey.generate()
        relay.DigestSchedule(ledger.service.ledger, digests, every=0, key=other).due()  # not ours
    assert [r.getMessage() for r in caplog.records] == ["digest withheld"] * 3
    assert whole == [] and sorted(digests.iterdir()) == [first, second]
