"""Replay reproduces the stored window and session state exactly, at every version.

A hypothesis state machine drives one session through random appends (tool calls, branches,
state deltas in every scope), batch ingests, compactions (sliding, turn and recursive with a fake
summarizer, some of them racing each other and an append from threads), rewinds and token counts,
on PostgreSQL, SQLite and the in-memory ledger. After every step it records what the service
serves (window, whole log, session state, stats) at the version it read; at the end the ledger
is replayed at each of those versions and must give exactly the same, every version a batch
passed through must be the previous window plus the batch's events, `verify` must pass, and must
still pass once the session is deleted.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sessionledger.domain import (
    AssistantMessage,
    ConcurrencyConflict,
    EventFilter,
    SessionEvent,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.domain.codec import event_to_payload
from sessionledger.domain.compaction import (
    RecursiveSummarizationStrategy,
    SlidingWindowStrategy,
    TurnWindowStrategy,
)
from sessionledger.domain.records import Kind
from sessionledger.domain.replay import replay
from sessionledger.domain.sessions import APP_PREFIX, USER_PREFIX
from sessionledger.domain.window_stats import window_stats
from sessionledger.infrastructure import SessionService, audit, open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.audit.replay import model_view_at, window_at

from tests.conftest import SQL_BACKENDS, backend_url
from tests.fakes.compaction import Always

EXAMPLES = {"postgres": 8, "sqlite": 8, "mariadb": 8, "memory": 40}
"""Examples per backend: the durable ones cost a few database round trips per step."""
INVOCATIONS = [f"inv-{i}" for i in range(5)]


class FakeSummarizer:
    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        self.calls += 1
        return f"summary #{self.calls} of {len(user_prompt)} characters"


STRATEGIES = {
    "sliding": lambda: SlidingWindowStrategy(max_events=4),
    "turns": lambda: TurnWindowStrategy(max_turns=2),
    "recursive": lambda: RecursiveSummarizationStrategy(
        FakeSummarizer(), max_events_to_keep=3, overlap_size=1
    ),
}

texts = st.text(alphabet="abcdefgh ", min_size=1, max_size=12)
state_deltas = st.dictionaries(
    st.sampled_from(["k1", "k2", "k3", "app:shared", "user:pref", "temp:scratch"]),
    st.one_of(st.none(), st.integers(-3, 3), texts, st.booleans()),
    max_size=3,
)
branches = st.sampled_from([None, None, "a", "a.b"])


@st.composite
def event_specs(draw: st.DrawFn) -> dict[str, Any]:
    """What to append: a message kind and the event's branch, invocation and state delta."""
    return {
        "kind": draw(st.sampled_from(["user", "user", "assistant", "tool", "system"])),
        "text": draw(texts),
        "branch": draw(branches),
        "invocation_id": draw(st.one_of(st.none(), st.sampled_from(INVOCATIONS))),
        "state_delta": draw(state_deltas),
        "metadata": draw(st.sampled_from([{}, {"source": "test"}])),
    }


def build_events(session_id: str, spec: dict[str, Any]) -> list[SessionEvent]:
    """One event, or for "tool" an assistant tool call followed by its response."""
    common = {
        "session_id": session_id,
        "branch": spec["branch"],
        "invocation_id": spec["invocation_id"],
        "metadata": spec["metadata"],
    }
    kind, text = spec["kind"], spec["text"]
    if kind == "tool":
        call = ToolCall(id=f"call-{text}", name="lookup", arguments='{"q": "x"}')
        return [
            SessionEvent(
                message=AssistantMessage(tool_calls=[call]), state_delta=spec["state_delta"], **common
            ),
            SessionEvent(message=ToolResponseMessage([ToolResponse(call.id, "lookup", text)]), **common),
        ]
    message = {"user": UserMessage, "assistant": AssistantMessage, "system": SystemMessage}[kind](text)
    return [SessionEvent(message=message, state_delta=spec["state_delta"], **common)]


def described(event: SessionEvent) -> tuple[Any, ...]:
    """Everything an event holds, for exact comparison (events compare equal by id alone)."""
    return (event.id, event.archived, event_to_payload(event))


@dataclass(frozen=True)
class Served:
    """What the service served at one version."""

    version: int
    window: list[tuple[Any, ...]]
    log: list[tuple[Any, ...]]
    state: dict[str, Any]
    stats: tuple[int, ...]


def read_served(service: SessionService, session_id: str) -> Served:
    """A read of the served projection that no concurrent write split (same version around it)."""
    while True:
        version = service.event_version(session_id)
        window = [described(e) for e in service.get_events(session_id, EventFilter.active())]
        log = [described(e) for e in service.get_events(session_id)]
        session = service.get_session(session_id)
        stats = service.window_stats(session_id)
        if service.event_version(session_id) == version and session is not None and stats is not None:
            state = {k: v for k, v in session.state.items() if not k.startswith((APP_PREFIX, USER_PREFIX))}
            return Served(
                version,
                window,
                log,
                state,
                (stats.events, stats.turns, stats.bytes, stats.events_since_summary),
            )


def run_session_machine(service: SessionService, examples: int) -> None:
    class SessionMachine(RuleBasedStateMachine):
        @initialize(
            state=st.dictionaries(
                st.sampled_from(["k1", "app:shared", "user:pref", "temp:x"]), st.integers(-(2**63), 2**63 - 1)
            )
        )
        def create(self, state: dict[str, Any]) -> None:
            self.session_id = service.create_session("auditor", app_name="props", state=state).id
            self.served: list[Served] = [read_served(service, self.session_id)]
            self.batches: list[tuple[int, list[SessionEvent]]] = []
            self.lock = threading.Lock()

        def record(self) -> None:
            served = read_served(service, self.session_id)
            with self.lock:
                self.served.append(served)

        @rule(spec=event_specs())
        def append(self, spec: dict[str, Any]) -> None:
            for event in build_events(self.session_id, spec):
                assert service.append_event(event)
                self.record()

        @rule(specs=st.lists(event_specs(), min_size=2, max_size=4))
        def ingest(self, specs: list[dict[str, Any]]) -> None:
            events = [e for spec in specs for e in build_events(self.session_id, spec)]
            before = service.event_version(self.session_id)
            service.ingest(events)
            self.batches.append((before, events))
            self.record()

        @rule(strategy=st.sampled_from(sorted(STRATEGIES)))
        def compact(self, strategy: str) -> None:
            service.compact(self.session_id, Always(), STRATEGIES[strategy]())
            self.record()

        @rule(
            first=st.sampled_from(sorted(STRATEGIES)),
            second=st.sampled_from(sorted(STRATEGIES)),
            spec=event_specs(),
        )
        def race(self, first: str, second: str, spec: dict[str, Any]) -> None:
            """Two compactions, an append and the evaluator storing token counts, at the same
            instant, from threads."""
            barrier = threading.Barrier(4)
            errors: list[BaseException] = []

            def compacting(name: str) -> None:
                barrier.wait()
                try:
                    service.compact(self.session_id, Always(), STRATEGIES[name]())
                except ConcurrencyConflict:
                    pass
                except BaseException as error:
                    errors.append(error)
                self.record()

            def appending() -> None:
                barrier.wait()
                try:
                    for event in build_events(self.session_id, spec):
                        service.append_event(event)
                except BaseException as error:
                    errors.append(error)
                self.record()

            def counting() -> None:
                barrier.wait()
                try:
                    service.fill_token_counts(self.session_id, len)
                except BaseException as error:
                    errors.append(error)

            threads = [threading.Thread(target=compacting, args=(first,)),
                       threading.Thread(target=compacting, args=(second,)),
                       threading.Thread(target=appending),
                       threading.Thread(target=counting)]  # fmt: skip
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert not errors, errors

        @rule(data=st.data(), present=st.booleans())
        def rewind(self, data: st.DataObject, present: bool) -> None:
            """Rewind before an invocation of the window (when `present` and there is one), else any."""
            window = service.get_events(self.session_id, EventFilter.active())
            candidates = sorted({e.invocation_id for e in window if e.invocation_id}) if present else []
            invocation = data.draw(st.sampled_from(candidates or INVOCATIONS))
            before = service.event_version(self.session_id)
            in_window = any(
                e.invocation_id == invocation
                for e in service.get_events(self.session_id, EventFilter.active())
            )
            if in_window:
                shared_before = _shared_state(service, self.session_id)
                state_before = read_served(service, self.session_id).state
                assert service.rewind(self.session_id, invocation) == before + 1
                assert all(
                    e.invocation_id != invocation
                    for e in service.get_events(self.session_id, EventFilter.active())
                )
                assert _shared_state(service, self.session_id) == shared_before
                expected = _state_without_hidden(service.records(self.session_id))
                expected.update({k: None for k in state_before if k not in expected})
                assert read_served(service, self.session_id).state == expected
            else:
                with pytest.raises(LookupError):
                    service.rewind(self.session_id, invocation)
                assert service.event_version(self.session_id) == before
            self.record()

        @precondition(lambda self: len(self.served) > 1)
        @rule()
        def count_tokens(self) -> None:
            service.fill_token_counts(self.session_id, len)
            self.record()

        @invariant()
        def served_version_matches_ledger(self) -> None:
            records = service.records(self.session_id)
            assert records[-1].version == service.event_version(self.session_id)

        def teardown(self) -> None:
            if not hasattr(self, "session_id"):
                return
            records = service.records(self.session_id)
            for served in self.served:
                assert_replays_to(records, served)
            for before, events in self.batches:
                assert_batch_versions(records, before, events)
            stats = service.window_stats(self.session_id)
            replayed = replay(records)
            counts = {r.position: r.token_count for r in records}
            assert stats == _full_stats(replayed, counts)
            assert verify(service, self.session_id).ok, verify(service, self.session_id).findings
            assert_replays_from_the_last_shaping_record(service, self.session_id)
            service.delete_session(self.session_id)
            assert_replays_from_the_last_shaping_record(service, self.session_id)
            after = verify(service, self.session_id)
            assert after.ok and after.deleted, after.findings
            erased = replay(service.records(self.session_id))
            assert erased.deleted and erased.window == () and erased.session_state == {}

    run_state_machine_as_test(
        SessionMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=18,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


def assert_replays_from_the_last_shaping_record(service: SessionService, session_id: str) -> None:
    """The audit page's replays (`window_at`, `model_view_at`), which read the records from the
    last compaction or rewind on, give at every version the window that replaying every record
    gives, and stand-ins that replay finds too."""
    records = service.records(session_id)
    ledger = service.ledger
    for version in range(records[-1].version + 1):
        full = audit.replay(service, session_id, version=version)
        from_shape = window_at(ledger, session_id, version)  # type: ignore[arg-type]
        assert (from_shape.version, from_shape.positions, from_shape.deleted) == (
            full.version,
            full.positions,
            full.deleted,
        )
        assert [e.id for e in from_shape.window] == [e.id for e in full.window]
        uncovered = {replace(s, covers=()) for s in full.stand_ins}
        assert set(from_shape.stand_ins) <= uncovered
        if from_shape.complete:
            assert from_shape == full
    for record in records:
        if record.kind is Kind.EVENT and record.payload is not None:
            saw = audit.what_the_model_saw(service, session_id, record.event_id or "")
            seen = model_view_at(ledger, session_id, record.event_id or "")  # type: ignore[arg-type]
            assert (seen.before.positions, seen.system_prompt) == (saw.before.positions, saw.system_prompt)


def assert_replays_to(records: list[Any], served: Served) -> None:
    projection = replay(records, upto_version=served.version)
    assert projection.version == served.version
    assert [described(e) for e in projection.window] == served.window
    assert [described(e) for e in (*projection.archived, *projection.window)] == served.log
    assert dict(projection.session_state) == served.state
    stats = _full_stats(projection, {})
    assert (stats.events, stats.turns, stats.bytes, stats.events_since_summary) == served.stats


def assert_batch_versions(records: list[Any], before: int, events: list[SessionEvent]) -> None:
    """Each version inside a batch: the window before it plus the batch's events so far."""
    start = replay(records, upto_version=before)
    state = dict(start.session_state)
    for i, event in enumerate(events, start=1):
        projection = replay(records, upto_version=before + i)
        assert [e.id for e in projection.window] == [e.id for e in start.window] + [e.id for e in events[:i]]
        state.update({k: v for k, v in event.state_delta.items() if ":" not in k})
        assert dict(projection.session_state) == state


def _shared_state(service: SessionService, session_id: str) -> dict[str, Any]:
    session = service.get_session(session_id)
    assert session is not None
    return {k: v for k, v in session.state.items() if k.startswith((APP_PREFIX, USER_PREFIX))}


def _state_without_hidden(records: list[Any]) -> dict[str, Any]:
    """The oracle for a rewind: the initial state, then the deltas of every event no rewind hid."""
    hidden = {p for r in records if r.kind is Kind.REWIND for p in r.payload["hidden"]}
    state = {k: v for k, v in records[0].payload["state"].items() if ":" not in k}
    for record in records:
        if record.kind is Kind.EVENT and record.position not in hidden:
            state.update({k: v for k, v in record.payload["state_delta"].items() if ":" not in k})
    return state


def _full_stats(projection: Any, counts: dict[int, int | None]) -> Any:
    return window_stats(
        (e, counts.get(p)) for p, e in zip(projection.window_positions, projection.window, strict=True)
    )


@pytest.mark.parametrize("backend", [*SQL_BACKENDS, "memory"])
def test_replay_reproduces_every_version(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[window_at.__module__], "CHUNK", 2)  # the walks cross many chunks
    with open_service(backend_url(request, backend)) as service:
        run_session_machine(service, EXAMPLES[backend])


def test_the_ledger_records_every_kind_the_machine_drives(sqlite_url: str) -> None:
    """The machine's steps really produce compactions, rewinds and erasures (the test can fail)."""
    with open_service(sqlite_url) as service:
        session_id = service.create_session("auditor", state={"k1": 1}).id
        for i in range(6):
            service.append_event(
                SessionEvent(
                    session_id=session_id, message=UserMessage(f"q{i}"), invocation_id=INVOCATIONS[i % 5]
                )
            )
            service.append_message(session_id, AssistantMessage(f"a{i}"), state_delta={"k2": i})
        service.compact(session_id, Always(), STRATEGIES["recursive"]())
        service.rewind(
            session_id, service.get_events(session_id, EventFilter.active())[-2].invocation_id or ""
        )
        service.delete_session(session_id)
        kinds = {r.kind for r in service.records(session_id)}
        assert kinds == {Kind.CREATED, Kind.EVENT, Kind.COMPACTION, Kind.REWIND, Kind.ERASURE}
        assert verify(service, session_id).ok
