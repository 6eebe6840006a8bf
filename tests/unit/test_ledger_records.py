"""The ledger's pure rules: canonical JSON, the hash chain, window stats and replay."""

from __future__ import annotations

import hashlib
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime, timedelta

import pytest
from sessionledger.domain import AssistantMessage, Session, SessionEvent, UserMessage
from sessionledger.domain.chain import chain_problems
from sessionledger.domain.entries import Entry, entry_payload
from sessionledger.domain.hashing import GENESIS_HASH, canonical
from sessionledger.domain.records import (
    Draft,
    Kind,
    LedgerRecord,
    compaction_draft,
    created_draft,
    entry_draft,
    erasure_draft,
    event_draft,
    rewind_draft,
)
from sessionledger.domain.replay import replay
from sessionledger.domain.window import WindowShape, WindowStats
from sessionledger.domain.window_stats import stats_after_appends, window_stats

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SID = "s-1"


def user(text: str, **fields) -> SessionEvent:
    return SessionEvent(session_id=SID, message=UserMessage(text), timestamp=T0, **fields)


def assistant(text: str) -> SessionEvent:
    return SessionEvent(session_id=SID, message=AssistantMessage(text), timestamp=T0)


def summary(text: str) -> SessionEvent:
    return SessionEvent(
        session_id=SID, message=AssistantMessage(text), timestamp=T0, metadata={"synthetic": True}
    )


class Chain:
    """Builds a session's records the way a ledger does: dense positions, each chained to the last."""

    def __init__(self, state: dict | None = None) -> None:
        session = Session(id=SID, user_id="u", created_at=T0)
        self.records: list[LedgerRecord] = [
            replace(created_draft(session, state or {}).place(SID, 1, 0, GENESIS_HASH), recorded_at=T0)
        ]
        self.version = 0

    def add(self, draft: Draft, *, bump: bool = True, at: datetime = T0) -> LedgerRecord:
        self.version += bump
        head = self.records[-1]
        record = replace(draft.place(SID, head.position + 1, self.version, head.row_hash), recorded_at=at)
        self.records.append(record)
        return record

    def append(self, *events: SessionEvent, at: datetime = T0) -> list[int]:
        return [self.add(event_draft(e), at=at).position for e in events]

    def compact(self, epoch: int, read_head: int, window: list[int], archived: list[int]) -> None:
        self.add(
            compaction_draft(
                at=T0,
                epoch=epoch,
                read_head=read_head,
                window=window,
                archived=archived,
                source="t",
                tokens_saved=0,
            ),
            bump=False,
        )


# --- canonical JSON and hashes -----------------------------------------------------------------


def test_canonical_json() -> None:
    assert canonical({"b": 1, "a": [1.5, None, True], "é": "✓"}) == '{"a":[1.5,null,true],"b":1,"é":"✓"}'
    assert canonical({"n": 10**20}) == '{"n":100000000000000000000}'
    for bad in ({"x": float("nan")}, {"x": float("inf")}, {"x": object()}, {1: 2, "a": 1}):
        with pytest.raises(ValueError):
            canonical(bad)


def test_content_hash_is_sha256_of_the_canonical_payload() -> None:
    draft = event_draft(user("hi"))
    assert draft.text == canonical(draft.payload)
    assert draft.content_hash == hashlib.sha256(draft.text.encode()).hexdigest()
    assert draft.size == len(draft.text.encode())
    for text in ("é", "漢字", "🙂"):  # a payload's size is its utf-8 bytes, not its characters
        wide = event_draft(user(text))
        assert wide.size == len(wide.text.encode()) > len(wide.text)
    assert draft.payload["message"]["text"] == "hi" and draft.payload["timestamp"].startswith(
        "2025-03-01T12:00"
    )


def test_a_plain_entry_has_the_text_and_hash_of_any_other() -> None:
    """`Entry.plain` skips checks, not the rule: the same canonical text, so the same content hash."""
    value = {"z": [1, "\u00e9", None, True, {"b": "x", "a": -(2**63)}], "a": "\u2028"}
    plain, checked = (entry_draft(SID, Entry("t", "k", value, plain), T0) for plain in (True, False))
    assert plain.text == checked.text == canonical(entry_payload(Entry("t", "k", value)))
    assert plain.content_hash == checked.content_hash
    assert Entry("t", "k", value, plain=True) == Entry("t", "k", value)


def test_a_conditional_draft_is_the_draft_with_its_expected_version() -> None:
    draft = event_draft(user("hi"))
    expecting = draft.expecting(7)
    assert expecting == replace(draft, expected_version=7) and type(expecting) is Draft
    with pytest.raises(FrozenInstanceError):
        expecting.expected_version = 8  # type: ignore[misc]  # the point: frozen like any other


def test_chain_links_each_record_to_the_last() -> None:
    chain = Chain()
    chain.append(user("a"), user("b"))
    records = chain.records
    assert records[0].prev_hash == GENESIS_HASH
    assert [r.prev_hash for r in records[1:]] == [r.row_hash for r in records[:-1]]
    assert len({r.row_hash for r in records}) == 3
    assert chain_problems(records) == []


def test_chain_names_each_kind_of_tampering() -> None:
    chain = Chain()
    chain.append(user("a"), user("b"), user("c"))
    records = chain.records
    edited = [*records[:2], replace(records[2], payload={**records[2].payload, "branch": "x"}), *records[3:]]
    assert chain_problems(edited) == [f"{SID} position 3: payload does not match its content hash (edited)"]
    renumbered = [*records[:2], replace(records[2], version=99), *records[3:]]
    assert chain_problems(renumbered) == [f"{SID} position 3: row hash does not match the record (edited)"]
    missing = [*records[:2], *records[3:]]
    assert chain_problems(missing) == [
        f"{SID} position 4: expected position 3 (a record is missing)",
        f"{SID} position 4: prev_hash does not match the previous record's hash",
    ]
    rehashed = [*records[:2], replace(records[2], row_hash="f" * 64), *records[3:]]
    assert len(chain_problems(rehashed)) == 2  # its own hash, and the next record's link


def test_recording_time_and_token_count_are_not_content() -> None:
    chain = Chain()
    chain.append(user("a"))
    records = [replace(r, recorded_at=T0 + timedelta(days=1), token_count=7) for r in chain.records]
    assert chain_problems(records) == []


def test_erased_payloads_still_verify() -> None:
    chain = Chain(state={"k": 1})
    chain.append(user("secret"))
    chain.add(erasure_draft(at=T0, reason="deleted"), bump=False)
    erased = [replace(r, payload=None) if r.kind in (Kind.CREATED, Kind.EVENT) else r for r in chain.records]
    assert chain_problems(erased) == []
    projection = replay(erased)
    assert projection.deleted and projection.window == () and projection.session_state == {}


# --- window stats ---------------------------------------------------------------------------------


def test_stats_after_each_append_equal_the_stats_of_the_window() -> None:
    events = [
        user("q1"),
        user("side", branch="b"),
        summary("sum"),
        user("q2"),
        assistant("a"),
    ]
    running = WindowStats()
    for i, event in enumerate(events):
        running = stats_after_appends(running, [event])
        assert running == window_stats((e, None) for e in events[: i + 1])
        assert running == stats_after_appends(WindowStats(), events[: i + 1])  # all at once
    assert running == WindowStats(
        events=5, turns=2, bytes=running.bytes, tokens=0, uncounted=5, events_since_summary=2
    )
    assert running.bytes == len("User: q1User: sideAssistant: sumUser: q2Assistant: a")


def test_window_stats_with_known_token_counts() -> None:
    stats = window_stats([(user("a"), 3), (user("b"), None), (summary("s"), 4)])
    assert (stats.tokens, stats.uncounted, stats.events_since_summary, stats.turns) == (7, 1, 0, 2)


# --- the window rule and replay -------------------------------------------------------------------


def test_window_shape_split() -> None:
    shape = WindowShape(prefix=[9, 4], base=6, hidden={7})
    assert shape.split([2, 3, 4, 5, 7, 8, 9, 10]) == ([2, 3, 5], [9, 4, 8, 10])
    assert WindowShape().split([2, 3]) == ([], [2, 3])


def test_replay_without_compaction_is_insertion_order() -> None:
    chain = Chain(state={"k": 1, "app:a": 1, "temp:t": 1})
    chain.append(user("a", state_delta={"n": 1, "user:x": 2}), user("b", state_delta={"n": None}))
    projection = replay(chain.records)
    assert [e.message.text for e in projection.window] == ["a", "b"]
    assert projection.archived == () and projection.version == 2
    assert projection.session_state == {"k": 1, "n": None}
    assert projection.window_positions == (2, 3)


def test_replay_of_compactions() -> None:
    chain = Chain()
    p = chain.append(user("q0"), user("q1"), user("q2"), user("q3"))  # positions 2..5
    s1 = chain.add(event_draft(summary("s1"))).position  # written by the compaction, same version
    chain.version -= 1
    chain.compact(epoch=0, read_head=p[-1], window=[s1, p[3]], archived=p[:3])
    late = chain.append(user("late"))  # appended after the compaction
    projection = replay(chain.records)
    assert [e.message.text for e in projection.window] == ["s1", "q3", "late"]
    assert [e.message.text for e in projection.archived] == ["q0", "q1", "q2"]
    assert all(e.archived for e in projection.archived) and not any(e.archived for e in projection.window)
    # a second compaction supersedes s1: it is in neither list, so it is archived
    s2 = chain.add(event_draft(summary("s2"))).position
    chain.version -= 1
    chain.compact(epoch=1, read_head=late[0], window=[s2, late[0]], archived=[s1, p[3]])
    projection = replay(chain.records)
    assert [e.message.text for e in projection.window] == ["s2", "late"]
    assert [e.message.text for e in projection.archived] == ["q0", "q1", "q2", "q3", "s1"]


def test_events_appended_during_a_compaction_follow_its_window() -> None:
    chain = Chain()
    p = chain.append(user("a"), user("b"), user("c"))
    during = chain.append(user("during"))  # after the compaction read position 4
    s = chain.add(event_draft(summary("s"))).position
    chain.version -= 1
    chain.compact(epoch=0, read_head=p[-1], window=[s, p[2]], archived=p[:2])
    assert [e.message.text for e in replay(chain.records).window] == ["s", "c", "during"]
    assert during[0] < s


def test_replay_up_to_a_version_or_a_time() -> None:
    chain = Chain()
    chain.append(user("a"), at=T0)
    chain.append(user("b"), at=T0 + timedelta(hours=1))
    chain.append(user("c"), at=T0 + timedelta(hours=2))
    assert [e.message.text for e in replay(chain.records, upto_version=2).window] == ["a", "b"]
    assert replay(chain.records, upto_version=0).window == ()
    at = replay(chain.records, at=T0 + timedelta(minutes=90))
    assert [e.message.text for e in at.window] == ["a", "b"] and at.version == 2


def test_replay_of_a_rewind() -> None:
    chain = Chain()
    p = chain.append(user("a"), user("b", invocation_id="i2"), user("c"))
    chain.add(
        rewind_draft(at=T0, before_invocation_id="i2", hidden=p[1:], window=p[:1], state_delta={"n": None})
    )
    after = chain.append(user("d"))
    projection = replay(chain.records)
    assert [e.message.text for e in projection.window] == ["a", "d"]
    assert projection.hidden == tuple(p[1:]) and projection.archived == ()
    assert projection.session_state == {"n": None}
    assert after[0] in projection.window_positions


@pytest.mark.parametrize("session_id, event_id", [("s", "e"), ('we"ird\\ü✓\n', None), ("\u2028x", "\x00")])
def test_row_hash_header_is_canonical_json(session_id: str, event_id: str | None) -> None:
    from sessionledger.domain.codec import format_timestamp
    from sessionledger.domain.hashing import row_hash, sha256_hex

    header = {
        "session_id": session_id,
        "position": 3,
        "version": 2,
        "event_id": event_id,
        "kind": "event",
        "occurred_at": format_timestamp(T0),
        "content_hash": "ab" * 32,
    }
    expected = sha256_hex(GENESIS_HASH + "\n" + canonical(header))
    assert row_hash(GENESIS_HASH, session_id, 3, 2, event_id, Kind.EVENT, T0, "ab" * 32) == expected


def test_a_record_and_a_draft_built_on_their_writable_twins_are_the_frozen_dataclasses() -> None:
    draft = event_draft(SessionEvent(session_id="s1", message=UserMessage("hi"), timestamp=T0))
    assert draft == Draft(
        draft.kind, draft.occurred_at, draft.payload, draft.text, draft.content_hash, draft.event,
        draft.event_id, draft.event_type, draft.branch, draft.synthetic,
    )  # fmt: skip
    assert type(draft) is Draft and draft.expected_version is None
    record = draft.place("s1", 1, 1, GENESIS_HASH, T0)
    fields = [getattr(record, name) for name in LedgerRecord.__slots__]
    assert type(record) is LedgerRecord and record == LedgerRecord(*fields)
    assert LedgerRecord._trusted(*fields) == record
    for frozen, name in ((draft, "text"), (record, "row_hash")):
        with pytest.raises(FrozenInstanceError):
            setattr(frozen, name, "changed")
    assert replace(record, token_count=3).token_count == 3 and record.token_count is None
