"""The keyword index (issue 32): a search it answers returns what the scan returns, page by page,
on SQLite (FTS5, in step by trigger) and PostgreSQL (pg_trgm, behind the writes, with the rows
past a session's mark scanned); an erased session's text leaves the index; an existing ledger
gets its index from the migration."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic import command
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sessionledger.domain import AssistantMessage, EventFilter, SessionEvent, UserMessage
from sessionledger.domain.entries import Entry
from sessionledger.domain.filters import MatchMode
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.agents import RecallTools
from sessionledger.infrastructure.agents.recall import instant_text
from sessionledger.infrastructure.ledger import events, text_index
from sessionledger.infrastructure.ledger.index_pacing import Pacing
from sessionledger.infrastructure.ledger.migrate import _config, upgrade

from tests.fakes.compaction import Always, SummarizeAllButTwo

WORDS = [
    "python", "Pythonic", "tea", "TEAPOT", "50%_off", "a_b", "ok", "zebra crossing", "naïve",
    "İstanbul", "ΟΔΟΣ", "οδος",
]  # fmt: skip
"""Texts are drawn from these (terms under three characters, LIKE's wildcards, mixed case, and
letters a database lowercases otherwise than Python: `İ`, a final `Σ`)."""
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
TERMS = [
    "summary",
    "python",
    "pyt",
    "tea",
    "teapot",
    "50%",
    "%_o",
    "a_b",
    "ok",
    "o",
    "zebra c",
    "absent",
    "naïve",
    "İstanbul",
    "ist",
    "οδος",
    "οδοσ",
]


@pytest.fixture(params=["sqlite", "postgres"])
def service(request) -> Iterator[SessionService]:
    """A fresh ledger: `index_text()` catches up every session of the database, so a database
    shared with the rest of the suite would make each call index all of theirs."""
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    with open_service(url, text_index="off") as service:  # the tests say when the index catches up
        yield service


def _indexed(service: SessionService) -> int:
    return service.ledger.index_text()  # type: ignore[attr-defined]


def _texts(events) -> list[tuple[str, str | None, bool]]:
    return [(e.id, e.message.text, e.archived) for e in events]


histories = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=3).map(" ".join), min_size=0, max_size=40
)
PATTERNS = ["pyth", "(?i)PYTHON", "te+a", "tea|ok", "50%_", "a.b", "(?i)TEAPOT", "Tea(pot)?"]
"""Regular expressions with a literal of three characters or more, and without."""
filters = st.builds(
    lambda keyword, keywords, mode, page, size, last_n, active, pattern: EventFilter(
        keyword=keyword,
        pattern=pattern,
        keywords=keywords,
        match_mode=mode,
        page=None if last_n is not None or size is None else page,
        page_size=None if last_n is not None else size,
        last_n=last_n,
        exclude_archived=active,
    ),
    st.none() | st.sampled_from(TERMS),
    st.none() | st.lists(st.sampled_from(TERMS), min_size=1, max_size=3).map(tuple),
    st.sampled_from([MatchMode.ANY, MatchMode.ALL]),
    st.integers(0, 3),
    st.none() | st.integers(1, 7),
    st.none() | st.integers(1, 9),
    st.booleans(),
    st.none() | st.sampled_from(PATTERNS),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=histories,
    split=st.integers(0, 40),
    compact_at=st.none() | st.integers(0, 40),
    f=filters,
    walk=st.sampled_from([0, 4, 12]),
)
@example(  # ANY over one indexable and one absent term: an index condition joined by AND finds nothing
    texts=["tea", "python", "ok"], split=3, compact_at=None, f=EventFilter(keywords=("tea", "absent")), walk=0
)
@example(  # ANY with a term under three characters: the index cannot narrow, the scan answers
    texts=["tea", "ok", "python"], split=3, compact_at=None, f=EventFilter(keywords=("tea", "ok")), walk=0
)
@example(  # ALL: the short term is left to the exact re-check
    texts=["tea ok", "tea", "ok"], split=3, compact_at=None,
    f=EventFilter(keywords=("tea", "ok"), match_mode=MatchMode.ALL), walk=0,
)  # fmt: skip
@example(  # a regular expression narrowed by its literal, whatever its case
    texts=["Python", "PYTHON 3", "jython"],
    split=3,
    compact_at=None,
    f=EventFilter(pattern="(?i)PYTHON"),
    walk=0,
)
@example(  # lowercased as Python lowercases: İ is i and a combining dot, a final Σ is ς
    texts=["İstanbul", "ist", "ΟΔΟΣ", "οδος"] * 2,
    split=4,
    compact_at=None,
    f=EventFilter(keyword="İstanbul"),
    walk=0,
)
@example(
    texts=["İstanbul", "ist", "ΟΔΟΣ", "οδος"] * 2,
    split=4,
    compact_at=None,
    f=EventFilter.keyword_search("οδος", 1, 2),
    walk=0,
)
@example(  # rows past the PostgreSQL index's mark
    texts=["python"] * 6, split=2, compact_at=None, f=EventFilter.keyword_search("python", 1, 2), walk=0
)
@example(  # the walk settles the page, before and after a compaction
    texts=["tea"] * 9, split=9, compact_at=5, f=EventFilter.keyword_search("tea", 1, 2), walk=4
)
@example(  # past the walk's end the prefix's summary comes before the kept events it follows
    texts=["tea"] * 6, split=6, compact_at=4,
    f=EventFilter(keywords=("summary", "tea"), page=0, page_size=3), walk=5,
)  # fmt: skip
def test_index_answers_as_the_scan_does(
    service: SessionService,
    monkeypatch: pytest.MonkeyPatch,
    texts: list[str],
    split: int,
    compact_at: int | None,
    f: EventFilter,
    walk: int,
) -> None:
    """Every page through the index equals the same filter applied to the whole log in Python
    (the scan's semantics), for histories partly indexed (PostgreSQL: rows after `split` are
    past the mark) and partly compacted (archived rows, a window prefix with a summary). The
    first-positions walk is shortened to `walk` (0: the index always) so that these short
    histories take each plan: the walk settling the page, the index, the scan."""
    monkeypatch.setattr(events, "WALK", walk)
    session_id = service.create_session("alice").id
    for n, text in enumerate(texts):
        if n == split:
            _indexed(service)
        if n == compact_at:
            service.compact(session_id, Always(), SummarizeAllButTwo())
        make = UserMessage if n % 2 == 0 else AssistantMessage
        service.append_message(session_id, make(text))
    expected = f.select(service.get_events(session_id))
    assert _texts(service.get_events(session_id, f)) == _texts(expected)


def test_the_index_is_used_for_a_rare_keyword_and_not_for_a_common_one(service: SessionService) -> None:
    """The plan choice: a keyword in few rows gets the index's candidates; one in more than
    `MAX_CANDIDATES` rows, or a term under three characters, gets the scan (`None`)."""
    session_id = service.create_session("alice").id
    service.ingest(
        [
            SessionEvent(
                session_id=session_id, message=UserMessage("rare needle" if n == 7 else "common hay")
            )
            for n in range(text_index.MAX_CANDIDATES + 10)
        ]
    )
    _indexed(service)
    engine: sa.Engine = service.ledger.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        assert text_index.candidates(conn, session_id, EventFilter(keyword="needle")) == [9]
        assert text_index.candidates(conn, session_id, EventFilter(keyword="hay")) is None
        assert text_index.candidates(conn, session_id, EventFilter(keyword="ne")) is None
    found = service.get_events(session_id, EventFilter.keyword_search("needle"))
    assert [e.message.text for e in found] == ["rare needle"]


def _index_holds(service: SessionService, word: str) -> int:
    """Rows of the index (any session) whose text holds `word`."""
    engine: sa.Engine = service.ledger.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            query = f"SELECT count(*) FROM {text_index.FTS_TABLE} WHERE {text_index.FTS_TABLE} MATCH :q"
            return conn.execute(sa.text(query), {"q": f'"{word}"'}).scalar_one()
        query = "SELECT count(*) FROM ledger_text WHERE text LIKE :q"
        return conn.execute(sa.text(query), {"q": f"%{word}%"}).scalar_one()


def test_erasure_removes_the_sessions_text_from_the_index(service: SessionService) -> None:
    kept = service.create_session("bob").id
    erased = service.create_session("alice").id
    service.append_message(kept, UserMessage("bob's kestrel-secret"))
    for n in range(5):
        service.append_message(erased, UserMessage(f"alice's kestrel-secret number {n}"))
    _indexed(service)
    assert _index_holds(service, "alice's kestrel") == 5
    service.delete_session(erased)
    _indexed(service)  # a deleted session is never indexed again
    assert _index_holds(service, "alice's kestrel") == 0
    assert _index_holds(service, "bob's kestrel") == 1
    assert service.get_events(erased, EventFilter.keyword_search("kestrel")) == []
    assert [e.message.text for e in service.get_events(kept, EventFilter.keyword_search("kestrel"))] == [
        "bob's kestrel-secret"
    ]


def test_a_ledger_from_0004_gets_its_index(service: SessionService) -> None:
    """Events stored at 0004 (no index) are in the index after the upgrade: SQLite's migration
    fills it, PostgreSQL's indexer catches the session up."""
    engine: sa.Engine = service.ledger.engine  # type: ignore[attr-defined]
    session_id = service.create_session("alice").id
    service.append_message(session_id, UserMessage("an osprey before"))
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0004")
        assert not sa.inspect(connection).has_table("ledger_text")
    for n in range(3):
        service.append_message(session_id, UserMessage(f"an osprey at 0004, {n}"))
    upgrade(engine)
    _indexed(service)
    assert _index_holds(service, "osprey") == 4
    with engine.connect() as conn:
        assert text_index.candidates(conn, session_id, EventFilter(keyword="osprey")) == [2, 3, 4, 5]
    found = service.get_events(session_id, EventFilter.keyword_search("osprey"))
    assert len(found) == 4


def test_only_event_rows_and_each_batchs_last_row_are_indexed(pg_url: str) -> None:
    """PostgreSQL: an adapter's entries (a LangGraph thread's checkpoints and writes) are never
    searched, so the indexer leaves them out, but for the last row of each batch, whatever its
    kind, which marks how far the session is indexed; searches answer as before, through the
    index and past its mark."""
    with open_service(pg_url, text_index="off") as service:
        engine: sa.Engine = service.ledger.engine  # type: ignore[attr-defined]
        session_id = service.create_session("alice").id  # position 1: the session's creation
        for n in range(6):  # each an entry at 2, 4, ... and an event at 3, 5, ...
            service.append_entries(session_id, [Entry("checkpoint", f"c{n}", {"step": n})])
            service.append_message(session_id, UserMessage(f"a curlew, {n}"))
        service.append_entries(session_id, [Entry("checkpoint", "last", {"step": 6})])  # 14: the head
        indexer = text_index.TextIndexer(engine, pacing=Pacing(lambda _: None, rest=0))
        assert indexer.run_once() == 14
        with engine.connect() as conn:
            indexed = conn.execute(
                sa.select(text_index.ledger_text.c.position, text_index.ledger_text.c.text)
                .where(text_index.ledger_text.c.session_id == session_id)
                .order_by(text_index.ledger_text.c.position)
            ).all()
        assert indexed == [(2 * n + 3, f"a curlew, {n}") for n in range(6)] + [(14, None)]
        service.append_entries(session_id, [Entry("checkpoint", "after", {"step": 7})])
        service.append_message(session_id, UserMessage("a curlew past the mark"))  # 16
        with engine.connect() as conn:
            assert text_index.candidates(conn, session_id, EventFilter(keyword="curlew")) == [
                3, 5, 7, 9, 11, 13, 15, 16
            ]  # fmt: skip
        found = service.get_events(session_id, EventFilter.keyword_search("curlew"))
        texts = [e.message.text for e in found]
        assert texts == [*(f"a curlew, {n}" for n in range(6)), "a curlew past the mark"]


def test_the_indexer_rests_while_writes_flow_and_not_when_the_ledger_is_idle(pg_url: str) -> None:
    """PostgreSQL's indexer (`index_pacing.Pacing`) rests three times each batch's time after a
    batch during which the ledger grew, and indexes an idle ledger without a rest; counted on a
    fake clock that, for its first readings, appends a row elsewhere (a writer at work)."""
    with open_service(pg_url, text_index="off") as service:
        engine: sa.Engine = service.ledger.engine  # type: ignore[attr-defined]
        loaded, written = service.create_session("alice").id, service.create_session("bob").id
        service.ingest(
            [SessionEvent(session_id=loaded, message=UserMessage(f"a heron, {n}")) for n in range(5_000)]
        )
        readings = iter(range(1_000))
        writes = 0

        def clock() -> float:
            nonlocal writes
            if writes < writing:
                writes += 1
                service.append_message(written, UserMessage(f"an egret, {writes}"))
            return float(next(readings))

        rests: list[float] = []
        indexer = text_index.TextIndexer(engine, pacing=Pacing(rests.append, rest=3.0, clock=clock))
        writing = 2  # the first batch's two clock readings append: during batches one and two
        assert indexer.run_once() == 5_004  # and each session's first row (its creation)
        # the first two batches grew the ledger, the next ones (and bob's) did not
        assert rests == [3.0, 3.0]
        assert _index_holds(service, "heron") == 5_000

        rests.clear()
        writing = 0
        service.ingest(
            [SessionEvent(session_id=loaded, message=UserMessage(f"a heron, {n}")) for n in range(5_000)]
        )
        assert indexer.run_once() == 5_000
        assert rests == [], "an idle ledger is indexed at full speed"


stamps = st.integers(0, 5).map(lambda minutes: EPOCH + timedelta(minutes=minutes))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sessions=st.lists(
        st.lists(st.tuples(st.sampled_from(["tea", "tea ok", " ", "python"]), stamps), max_size=8),
        min_size=1,
        max_size=4,
    ),
    query=st.sampled_from(["tea", "", "ok,python", "absent"]),
    page=st.integers(0, 3),
)
def test_cross_session_search_reads_a_bound_and_answers_as_sorting_every_match(
    service: SessionService, sessions: list[list[tuple[str, datetime]]], query: str, page: int
) -> None:
    """`cross_session_search` reads each session's first page, then only matches up to a bound
    timestamp; its answer is that of sorting every match (`RecallTools`' rule), timestamps out
    of log order and ties included."""
    user = f"user-{uuid.uuid4().hex[:8]}"
    expected: list[tuple[datetime, dict[str, str]]] = []
    for texts in sessions:
        session_id = service.create_session(user).id
        for text, moment in texts:
            event = SessionEvent(session_id=session_id, message=UserMessage(text), timestamp=moment)
            service.append_event(event)
    tools = RecallTools(service, page_size=2)
    search = EventFilter() if not query else EventFilter(keywords=tuple(query.split(",")))
    for session in service.list_sessions(user):
        for event in service.get_events(session.id, search):
            if event.message.text.strip():
                item = {"sessionId": session.id, "timestamp": instant_text(event.timestamp)}
                expected.append((event.timestamp, {**item, "type": "user", "text": event.message.text}))
    expected.sort(key=lambda pair: pair[0])
    page_of = [item for _, item in expected[page * 2 : page * 2 + 2]]
    answer = tools.cross_session_search(user, query, page=page)
    assert (json.loads(answer) if page_of else answer) == (page_of or "No results found.")
