"""`SessionService.append_event(..., expected_version=)`: an append that holds only while the session
is at the version the caller saw, checked in the ledger's own write (what the google-adk adapter's
stale-session check rests on), across services on one ledger too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from sessionledger.domain import ConcurrencyConflict, SessionEvent, SessionNotFound, UserMessage
from sessionledger.domain.append_outcomes import AppendOutcome, Tally
from sessionledger.domain.records import Draft
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.bootstrap import Storage
from sessionledger.infrastructure.service import append_draft


def event(session_id: str, text: str) -> SessionEvent:
    return SessionEvent(session_id=session_id, message=UserMessage(text))


def test_an_append_at_the_expected_version_is_stored_and_any_other_is_refused(database_url):
    with open_service(database_url) as service:
        sid = service.create_session("u").id
        assert service.append_event(event(sid, "one"), expected_version=0)
        with pytest.raises(ConcurrencyConflict):
            service.append_event(event(sid, "stale"), expected_version=0)
        with pytest.raises(ConcurrencyConflict):
            service.append_event(event(sid, "ahead"), expected_version=5)
        assert service.append_event(event(sid, "two"), expected_version=1)
        assert [m.text for m in service.get_messages(sid)] == ["one", "two"]
        assert service.event_version(sid) == 2


@pytest.mark.parametrize("version", ["1", 1.0, True, -1])
def test_an_expected_version_that_is_no_version_is_a_value_error(database_url, version):
    """Not a conflict (a string never matched), nor a float or a bool taken for an int."""
    with open_service(database_url) as service:
        sid = service.create_session("u").id
        assert service.append_event(event(sid, "one"))
        with pytest.raises(ValueError, match=r"^expected_version must be an event_version \(an int >= 0\)"):
            service.append_event(event(sid, "two"), expected_version=version)
        assert [m.text for m in service.get_messages(sid)] == ["one"]


def test_a_version_moved_by_another_service_is_seen_through_the_head_cache(database_url):
    if database_url == "memory://":
        pytest.skip("one memory ledger per service")
    with open_service(database_url) as first, open_service(database_url) as second:
        sid = first.create_session("u").id
        assert first.append_event(event(sid, "a"), expected_version=0)  # first caches the head
        assert second.append_event(event(sid, "b"), expected_version=1)
        with pytest.raises(ConcurrencyConflict):
            first.append_event(event(sid, "c"), expected_version=1)  # its cache is behind: re-read
        assert first.append_event(event(sid, "c"), expected_version=2)
        assert [m.text for m in second.get_messages(sid)] == ["a", "b", "c"]


def test_a_conditional_append_keeps_unknown_sessions_and_duplicates_as_they_were(database_url):
    with open_service(database_url) as service:
        with pytest.raises(SessionNotFound):
            service.append_event(event("nowhere", "x"), expected_version=0)
        sid = service.create_session("u").id
        once = event(sid, "once")
        assert service.append_event(once, expected_version=0)
        assert service.append_event(once, expected_version=1) is False


def conditional(session_id: str, text: str, expected_version: int) -> Draft:
    """An event's draft whose append holds only at `expected_version` (as `append_event` makes it)."""
    return replace(append_draft(event(session_id, text), 1 << 20), expected_version=expected_version)


@pytest.mark.parametrize("tally", [False, True], ids=["no-tally", "tally"])
def test_a_stale_expected_version_is_a_conflict_with_a_tally_or_without(
    storage: Storage, unique: Callable[[str], str], tally: bool
) -> None:
    """The rule is one (`domain.write_plans`) on every backend and on every append path: the one
    event alone, the counted one (the batch path) and a batch, where each event is checked at the
    version the batch's earlier events left. A conflict stores nothing and counts nothing."""
    service, stored, duplicate = storage.service, unique("stored"), unique("duplicate")
    counted = Tally(stored=stored, duplicate=duplicate) if tally else None
    sid = service.create_session("u").id
    assert service.ingest([conditional(sid, "one", 0)], tally=counted) == [AppendOutcome.STORED]
    assert service.ingest([conditional(sid, "stale", 0)], tally=counted) == [AppendOutcome.CONFLICT]
    assert service.ingest([conditional(sid, "ahead", 5)], tally=counted) == [AppendOutcome.CONFLICT]
    batch = [conditional(sid, "two", 1), conditional(sid, "late", 1), conditional(sid, "three", 2)]
    assert service.ingest(batch, tally=counted) == [
        AppendOutcome.STORED,
        AppendOutcome.CONFLICT,
        AppendOutcome.STORED,
    ]
    assert [m.text for m in service.get_messages(sid)] == ["one", "two", "three"]
    assert service.event_version(sid) == 3
    totals = storage.counters.totals()
    if tally:
        assert totals[stored] == 3 and duplicate not in totals
    else:
        assert stored not in totals
