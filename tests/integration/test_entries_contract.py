"""Adapters' entries (docs/api.md "Adapter entries"), one suite run on every backend:
`append_entries` and `entries`, the forget rule, entries outside the message window and on the
hash chain (verify, replay, export/import, timeline), erased with their session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sessionledger.domain import EventFilter, SessionEvent, SessionNotFound, UserMessage
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.entries import Entry, Forget
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import SessionService, open_async_service, open_service
from sessionledger.infrastructure.audit import export_lines, import_lines, replay, verify
from sessionledger.infrastructure.audit.timeline import timeline

from tests.conftest import SQL_BACKENDS, sql_url


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


@pytest.fixture
def session_id(service: SessionService) -> str:
    return service.create_session("ada", app_name="adapters", session_id=f"s-{uuid.uuid4().hex[:10]}").id


def keys(found) -> list[str]:
    return [entry.key for entry in found]


def test_entries_read_newest_first_by_type_prefix_and_limit(service: SessionService, session_id: str) -> None:
    service.append_entries(
        session_id,
        [Entry("checkpoint", f"ns|{i}", {"i": i}) for i in range(5)]
        + [Entry("write", "ns|4|t", {"w": 1}), Entry("checkpoint", "other|1", {"i": 9})],
    )
    assert keys(service.entries(session_id, "checkpoint")) == [
        "other|1",
        "ns|4",
        "ns|3",
        "ns|2",
        "ns|1",
        "ns|0",
    ]
    assert keys(service.entries(session_id, "checkpoint", prefix="ns|", limit=2)) == ["ns|4", "ns|3"]
    assert keys(service.entries(session_id, ["checkpoint", "write"], prefix="ns|4")) == ["ns|4|t", "ns|4"]
    latest = service.entries(session_id, "checkpoint", prefix="ns|", limit=1)[0]
    assert (latest.type, latest.value) == ("checkpoint", {"i": 4})
    assert latest.position == service.records(session_id)[-3].position
    assert service.entries(session_id, "checkpoint", prefix="NS|") == []  # a prefix is case-sensitive
    assert service.entries(session_id, "store") == []
    assert service.entries("no-such-session", "checkpoint") == []


def test_a_key_written_again_keeps_both_values_live(service: SessionService, session_id: str) -> None:
    service.append_entries(session_id, [Entry("item", "k", {"v": 1})])
    service.append_entries(session_id, [Entry("item", "k", {"v": 2})])
    assert [e.value for e in service.entries(session_id, "item")] == [{"v": 2}, {"v": 1}]


def test_a_forget_hides_what_it_matches_before_it(service: SessionService, session_id: str) -> None:
    service.append_entries(
        session_id,
        [
            Entry("checkpoint", "a|1", {}),
            Entry("checkpoint", "a|2", {}),
            Entry("checkpoint", "b|1", {}),
            Entry("write", "a|1|t", {}),
        ],
    )
    service.append_entries(session_id, [Forget("checkpoint", keys=("a|1",))])
    assert keys(service.entries(session_id, ["checkpoint", "write"])) == ["a|1|t", "b|1", "a|2"]
    service.append_entries(session_id, [Forget("write", prefix="a|")])
    assert keys(service.entries(session_id, ["checkpoint", "write"])) == ["b|1", "a|2"]
    service.append_entries(session_id, [Forget()])  # every type, every key
    assert service.entries(session_id, ["checkpoint", "write"]) == []
    # what is written after a forget is live again, under the same keys
    service.append_entries(session_id, [Entry("checkpoint", "a|1", {"again": True})])
    assert [(e.key, e.value) for e in service.entries(session_id, "checkpoint")] == [("a|1", {"again": True})]
    # the ledger keeps every entry and every forget
    kinds = [r.kind for r in service.records(session_id)]
    assert kinds.count(Kind.ENTRY) == 5 and kinds.count(Kind.FORGOTTEN) == 3


def test_a_limit_counts_live_entries_past_many_forgotten(service: SessionService, session_id: str) -> None:
    service.append_entries(session_id, [Entry("checkpoint", "keep", {})])
    for i in range(40):
        service.append_entries(
            session_id, [Entry("checkpoint", f"gone|{i}", {}), Forget("checkpoint", "gone|")]
        )
    assert keys(service.entries(session_id, "checkpoint", limit=1)) == ["keep"]


def test_entries_stay_outside_the_message_window(service: SessionService, session_id: str) -> None:
    service.append_message(session_id, UserMessage("hello"))
    version, stats = service.event_version(session_id), service.window_stats(session_id)
    service.append_entries(session_id, [Entry("checkpoint", "c|1", {"step": 1}), Forget("write")])
    service.append_message(session_id, UserMessage("again"))
    assert [m.text for m in service.get_messages(session_id)] == ["hello", "again"]
    assert [e.message.text for e in service.get_events(session_id, EventFilter.all())] == ["hello", "again"]
    assert service.event_version(session_id) == version + 1  # the entries moved no version
    assert stats is not None and service.window_stats(session_id).events == stats.events + 1  # type: ignore[union-attr]


def test_events_and_entries_in_one_call_store_each_message_once(
    service: SessionService, session_id: str
) -> None:
    first = SessionEvent(session_id=session_id, message=UserMessage("hi"), id="m1")
    second = SessionEvent(session_id=session_id, message=UserMessage("there"), id="m2")
    assert service.append_entries(session_id, [Entry("checkpoint", "1", {})], events=[first]) == [
        AppendOutcome.STORED
    ]
    outcomes = service.append_entries(session_id, [Entry("checkpoint", "2", {})], events=[first, second])
    assert outcomes == [AppendOutcome.DUPLICATE, AppendOutcome.STORED]
    assert [m.text for m in service.get_messages(session_id)] == ["hi", "there"]
    assert keys(service.entries(session_id, "checkpoint")) == ["2", "1"]


def test_entries_are_on_the_chain(service: SessionService, session_id: str) -> None:
    service.append_message(session_id, UserMessage("hello"))
    service.append_entries(session_id, [Entry("checkpoint", "c|1", {"x": [1, 2.5, None]})])
    service.append_entries(session_id, [Forget("checkpoint", keys=("c|1",))])
    service.append_message(session_id, UserMessage("after"))
    assert verify(service, session_id).ok
    assert [e.message.text for e in replay(service, session_id).window] == ["hello", "after"]
    described = [entry.text for entry in timeline(service, session_id)]
    assert "checkpoint entry 'c|1'" in described
    assert "forgot entries of checkpoint under '', 1 keys" in described


def test_export_and_import_keep_entries(service: SessionService, session_id: str) -> None:
    service.append_entries(session_id, [Entry("checkpoint", "c|1", {"v": 1}), Entry("checkpoint", "c|2", {})])
    service.append_entries(session_id, [Forget("checkpoint", keys=("c|2",))])
    lines = list(export_lines(service, session_id))
    with open_service("memory://") as other:
        import_lines(other, lines)
        assert [(e.key, e.value) for e in other.entries(session_id, "checkpoint")] == [("c|1", {"v": 1})]
        assert verify(other, session_id).ok


def test_deleting_the_session_erases_entries(service: SessionService, session_id: str) -> None:
    service.append_entries(session_id, [Entry("store", "secret", {"text": "my password"}), Forget("store")])
    service.delete_session(session_id)
    assert service.entries(session_id, "store") == []
    erased = [r for r in service.records(session_id) if r.kind in (Kind.ENTRY, Kind.FORGOTTEN)]
    assert len(erased) == 2 and all(r.payload is None for r in erased)
    assert verify(service, session_id).ok
    with pytest.raises(SessionNotFound):
        service.append_entries(session_id, [Entry("store", "k", {})])


def test_refusals_store_nothing(service: SessionService, session_id: str) -> None:
    head = len(service.records(session_id))
    with pytest.raises(ValueError):
        service.append_entries(session_id, [Entry("checkpoint", "ok", {}), "not an entry"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        service.append_entries(session_id, [Entry("checkpoint", "k", {"bad": {1, 2}})])
    with pytest.raises(ValueError):
        service.append_entries(
            session_id, [], events=[SessionEvent(session_id="other", message=UserMessage("x"))]
        )
    with pytest.raises(ValueError):
        service.append_entries(session_id, [Entry("checkpoint", "k", {})], user_id="mallory")
    with pytest.raises(ValueError):
        Entry("checkpoint", "", {})
    with pytest.raises(ValueError):
        service.entries(session_id, [])
    with pytest.raises(SessionNotFound):
        service.append_entries("no-such-session", [Entry("checkpoint", "k", {})])
    for surrogate in (Entry("checkpoint", "k", {"v": "a\ud800"}), Entry("checkpoint", "k\udfff", {})):
        with pytest.raises(ValueError, match="which UTF-8 cannot encode"):
            service.append_entries(session_id, [Entry("checkpoint", "ok", {}), surrogate])
    with pytest.raises(ValueError, match=r"^a forget holds .*, which UTF-8 cannot encode"):
        service.append_entries(session_id, [Forget("checkpoint", keys=("k\udfff",))])
    assert len(service.records(session_id)) == head
    service.append_entries(session_id, [Entry("checkpoint", "k", {})], user_id="ada")
    assert service.entries(session_id, "checkpoint", user_id="mallory") == []
    assert keys(service.entries(session_id, "checkpoint", user_id="ada")) == ["k"]


def test_an_edited_entry_key_fails_verify(sqlite_url: str) -> None:
    with open_service(sqlite_url) as service:
        sid = service.create_session("ada").id
        service.append_entries(sid, [Entry("checkpoint", "c|1", {})])
        with service.ledger.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(sa.text("UPDATE ledger SET branch = 'c|2' WHERE kind = 'entry'"))
        result = verify(service, sid)
        assert not result.ok and result.first is not None and result.first.position == 2


def test_the_async_service_has_both_methods(database_url: str) -> None:
    async def run() -> None:
        async with open_async_service(database_url) as service:
            sid = (await service.create_session("ada")).id
            await service.append_entries(sid, [Entry("checkpoint", "c", {"v": 1})])
            assert [e.value for e in await service.entries(sid, "checkpoint")] == [{"v": 1}]

    asyncio.run(run())


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_two_writers_on_one_database_keep_one_chain(backend: str, request: pytest.FixtureRequest) -> None:
    """Each service caches the head it last wrote; the other's appends move it, and the next
    append finds out (the one-statement append changes nothing then, and the batch path writes)."""
    url = sql_url(request, backend, shared=True)
    with open_service(url) as first, open_service(url) as second:
        sid = first.create_session("ada").id
        for n in range(6):
            writer = first if n % 2 == 0 else second
            event = SessionEvent(session_id=sid, message=UserMessage(f"m{n}"), id=f"m{n}")
            writer.append_entries(sid, [Entry("checkpoint", f"c|{n}", {"n": n})], events=[event])
        assert keys(first.entries(sid, "checkpoint")) == [f"c|{n}" for n in reversed(range(6))]
        assert [m.text for m in second.get_messages(sid)] == [f"m{n}" for n in range(6)]
        assert first.event_version(sid) == 6 and first.window_stats(sid).events == 6  # type: ignore[union-attr]
        assert verify(first, sid).ok


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_a_stale_head_inserts_none_of_the_rows(backend: str, request: pytest.FixtureRequest) -> None:
    """The head moved behind the cache's back with no row at the positions after it: the
    one-round-trip append of several rows (one statement on PostgreSQL, one packet on MariaDB)
    inserts none of them there, and the batch path writes them after the moved head."""
    with open_service(sql_url(request, backend)) as service:
        sid = service.create_session("ada").id
        service.append_entries(sid, [Entry("checkpoint", "c|0", {})])  # caches the head
        cached = service.records(sid)[-1].position
        with service.ledger.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(sa.text("UPDATE sessions SET head_position = head_position + 1000"))
        service.append_entries(sid, [Entry("checkpoint", f"c|{n}", {}) for n in range(1, 4)])
        positions = [record.position for record in service.records(sid)]
        assert positions[:-3] == list(range(1, cached + 1))
        assert positions[-3:] == [cached + 1001, cached + 1002, cached + 1003]
