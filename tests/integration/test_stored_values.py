"""Every value a backend accepts comes back exactly; every value it could not keep is a clear ValueError.

One suite run on memory, SQLite and PostgreSQL: integers at the edge of 64 bits (and beyond), NUL
characters, ids at and over their length limit, paging at the edge of a database integer,
arguments of the wrong shape, and payloads over `max_payload_bytes`. The refusals hold at append,
at `create_session`, at `publish()` and at import, and leave nothing behind; what was stored
before these rules stays readable.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sessionledger.domain import (
    EventFilter,
    Message,
    MessageType,
    Session,
    SessionEvent,
    ToolResponse,
    UserMessage,
)
from sessionledger.domain.codec import parse_timestamp
from sessionledger.domain.hashing import GENESIS_HASH, canonical, row_hash, sha256_hex
from sessionledger.domain.ids import MAX_ID_LENGTH
from sessionledger.domain.records import event_draft
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import export_lines, import_lines, verify
from sessionledger.infrastructure.publisher import EventPublisher

EDGES = {"max": 2**63 - 1, "min": -(2**63), "nested": [{"max": 2**63 - 1}], "float": 1e30}
"""The largest and smallest integers a value may hold, and a float as large as a refused integer."""

BEYOND = [2**63, -(2**63) - 1, 10**30]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url, max_payload_bytes=4000) as svc:
        yield svc


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def assert_exact(value: Any, expected: Any) -> None:
    """Equal, and of the same type all the way down (a float `1e30 == 10**30` would pass `==`)."""
    assert value == expected and type(value) is type(expected), (value, expected)
    if isinstance(expected, dict):
        for key in expected:
            assert_exact(value[key], expected[key])
    elif isinstance(expected, list):
        for item, wanted in zip(value, expected, strict=True):
            assert_exact(item, wanted)


def session_with_edges(service: SessionService) -> str:
    session = service.create_session(
        unique("u"), app_name=unique("app"), metadata=EDGES, state={**EDGES, "user:edges": EDGES}
    )
    service.append_message(
        session.id,
        UserMessage("edges", metadata=EDGES),
        metadata=EDGES,
        state_delta={"delta": EDGES, "app:edges": EDGES},
    )
    return session.id


def assert_edges_kept(service: SessionService, session_id: str) -> None:
    """Every edge value back exactly (an import merges the app's and user's state too)."""
    session = service.get_session(session_id)
    assert session is not None
    assert_exact(dict(session.metadata), EDGES)
    shared = {"user:edges": EDGES, "app:edges": EDGES}
    assert_exact(dict(session.state), {**EDGES, "delta": EDGES, **shared})
    [event] = service.get_events(session_id)
    assert_exact(dict(event.metadata), EDGES)
    assert_exact(dict(event.message.metadata), EDGES)
    assert_exact(dict(event.state_delta), {"delta": EDGES, "app:edges": EDGES})
    assert verify(service, session_id).ok, verify(service, session_id).findings


def test_timestamps_come_back_in_utc_at_the_same_instant(service: SessionService) -> None:
    """Whatever zone a time was given in, it is read back as the same instant in `datetime.UTC`
    (on PostgreSQL straight from the driver: the session time zone is UTC)."""
    east = timezone(timedelta(hours=5, minutes=30))
    at = datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=east)
    session = service.create_session(unique("u"), app_name=unique("app"))
    service.append_event(SessionEvent(session_id=session.id, message=UserMessage("when"), timestamp=at))
    [event] = service.get_events(session.id)
    [*_, record] = service.records(session.id)
    stored = service.get_session(session.id)
    assert stored is not None
    for moment in (event.timestamp, record.occurred_at, record.recorded_at, stored.created_at):
        assert moment is not None and moment.tzinfo is UTC, moment
    assert event.timestamp == at and record.occurred_at == at


# --- integers ------------------------------------------------------------------------------------


def test_integers_up_to_the_edge_of_64_bits_come_back_exactly_and_one_past_it_is_refused(
    service: SessionService,
) -> None:
    assert_edges_kept(service, session_with_edges(service))
    for past in (EDGES["max"] + 1, EDGES["min"] - 1):
        with pytest.raises(ValueError, match="beyond 64 bits"):
            service.create_session(unique("u"), state={"k": past})


def test_integers_up_to_the_edge_of_64_bits_survive_export_and_import_and_one_past_it_does_not(
    service: SessionService,
) -> None:
    exported = list(export_lines(service, session_with_edges(service)))
    with open_service("memory://") as elsewhere:
        imported = import_lines(elsewhere, exported).session_id
        assert_edges_kept(elsewhere, imported)
        back = list(export_lines(elsewhere, session_with_edges(elsewhere)))
    past = forged(back, _created_state(EDGES["max"] + 1))
    with pytest.raises(ValueError, match="beyond 64 bits"):
        import_lines(service, past)
    assert_edges_kept(service, import_lines(service, back).session_id)


@pytest.mark.parametrize("number", BEYOND)
def test_integers_beyond_64_bits_are_refused_and_nothing_is_stored(
    service: SessionService, number: int
) -> None:
    user = unique("u")
    for place in ("metadata", "state"):
        with pytest.raises(
            ValueError, match=rf"^{place} is not JSON-serializable: \['k'\] is {number}, beyond 64 bits"
        ):
            service.create_session(user, **{place: {"k": number}})
    assert service.list_sessions(user) == []
    session_id = service.create_session(user).id
    for refused in (
        lambda: service.append_message(session_id, UserMessage("x"), metadata={"k": [number]}),
        lambda: service.append_message(session_id, UserMessage("x"), state_delta={"user:k": number}),
        lambda: service.append_message(session_id, UserMessage("x", metadata={"k": {"n": number}})),
    ):
        with pytest.raises(ValueError, match="beyond 64 bits"):
            refused()
    assert service.event_version(session_id) == 0 and service.get_user_state(user) == {}


# --- NUL characters ---------------------------------------------------------------------------------


def test_a_nul_character_is_refused_and_keyword_search_keeps_working(service: SessionService) -> None:
    session_id = service.create_session(unique("u")).id
    service.append_message(session_id, UserMessage("before and after"))
    with pytest.raises(ValueError, match="text contains a NUL character"):
        service.append_message(session_id, UserMessage("before\x00after"))
    for field, value in (("metadata", {"k": "a\x00"}), ("state_delta", {"k\x00": 1})):
        with pytest.raises(
            ValueError, match=f"^{field} is not JSON-serializable: .* contains a NUL character"
        ):
            service.append_message(session_id, UserMessage("x"), **{field: value})
    for field, value in (("metadata", {"k": ["\x00"]}), ("state", {"k": {"\x00": 1}})):
        with pytest.raises(
            ValueError, match=f"^{field} is not JSON-serializable: .* contains a NUL character"
        ):
            service.create_session(unique("u"), **{field: value})
    assert [e.message.text for e in service.get_events(session_id, EventFilter.keyword_search("after"))] == [
        "before and after"
    ]
    with pytest.raises(ValueError, match="keyword contains a NUL character"):
        service.get_events(session_id, EventFilter.keyword_search("\x00"))


def test_publish_refuses_what_the_ledger_would_refuse() -> None:
    publisher = EventPublisher("memory://localhost//", queue_prefix=f"t{uuid.uuid4().hex[:8]}")
    try:
        for problem, fields in (
            ("beyond 64 bits", {"metadata": {"n": 2**64}}),
            ("beyond 64 bits", {"state_delta": {"n": -(2**63) - 1}}),
            ("contains a NUL character", {"metadata": {"k": "\x00"}}),
            ("contains a NUL character", {"message": UserMessage("x", metadata={"\x00": 1})}),
        ):
            with pytest.raises(ValueError, match=problem):
                publisher.publish(SessionEvent(**{"session_id": "s", "message": UserMessage("x"), **fields}))
        assert publisher.pending == 0 and publisher.published == 0
    finally:
        publisher.close()


# --- import of an export a forger re-hashed -----------------------------------------------------------


def forged(lines: list[str], change: Callable[[dict[str, Any]], None]) -> list[str]:
    """The export with `change` applied to every record and the whole chain hashed again, so that
    only the import's checks of the values themselves can refuse it."""
    header, *records = (json.loads(line) for line in lines)
    previous = GENESIS_HASH
    for record in records:
        change(record)
        record["content_hash"] = sha256_hex(canonical(record["payload"]))
        record["prev_hash"] = previous
        record["row_hash"] = previous = row_hash(
            previous,
            record["session_id"],
            record["position"],
            record["version"],
            record["event_id"],
            record["kind"],
            parse_timestamp(record["occurred_at"]),
            record["content_hash"],
        )
    header["head_hash"] = previous
    return [json.dumps(line, ensure_ascii=False) for line in (header, *records)]


def _created_state(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        if record["kind"] == "created":
            record["payload"]["state"]["k"] = value

    return change


def _created_user(user_id: str) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        if record["kind"] == "created":
            record["payload"]["user_id"] = user_id

    return change


def _event_text(text: str) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        if record["kind"] == "event":
            record["payload"]["message"]["text"] = text

    return change


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (_created_state(10**30), r"record 1 \(created\) is malformed: .* is 10{30}, beyond 64 bits"),
        (_created_state("\x00"), r"record 1 \(created\) is malformed: .* contains a NUL character"),
        (_event_text("a\x00b"), r"record 2 \(event\) is malformed: text contains a NUL character"),
        (_created_user("u" * (MAX_ID_LENGTH + 1)), "^user_id is 256 characters long"),
    ],
)
def test_import_refuses_values_the_ledger_would_refuse(
    service: SessionService, change: Callable[[dict[str, Any]], None], problem: str
) -> None:
    with open_service("memory://") as source:
        session_id = source.create_session(unique("u"), state={"k": 1}).id
        source.append_message(session_id, UserMessage("hello"))
        lines = list(export_lines(source, session_id))
    with open_service("memory://") as elsewhere:  # the forging itself is sound
        import_lines(elsewhere, forged(lines, lambda record: None))
    with pytest.raises(ValueError, match=problem):
        import_lines(service, forged(lines, change))
    assert service.records(session_id) == [] and service.get_session(session_id) is None


# --- ids --------------------------------------------------------------------------------------------


def test_ids_at_the_length_limit_are_stored_and_indexed(service: SessionService) -> None:
    longest = "𝄞" * MAX_ID_LENGTH  # 4 bytes each: a session id and an event id in one index entry
    session_id, user = (longest[:-32] + uuid.uuid4().hex for _ in range(2))
    session = service.create_session(user, session_id=session_id, app_name=longest)
    assert (session.id, session.user_id, session.app_name) == (session_id, user, longest)
    event = SessionEvent(
        session_id=session_id, id=longest, message=UserMessage("x"), branch=longest, invocation_id=longest
    )
    assert service.append_event(event) and not service.append_event(event)
    [stored] = service.get_events(session_id, EventFilter.for_branch(longest))
    assert (stored.id, stored.branch, stored.invocation_id) == (longest, longest, longest)
    assert [s.id for s in service.list_sessions(user, app_name=longest)] == [session_id]


TOO_LONG = "x" * (MAX_ID_LENGTH + 1)


@pytest.mark.parametrize("bad", [TOO_LONG, "a\x00b"])
def test_new_ids_a_backend_could_not_index_are_value_errors(service: SessionService, bad: str) -> None:
    user = unique("u")
    session_id = service.create_session(user).id
    creates: list[tuple[str, Callable[[], object]]] = [
        ("session_id", lambda: service.create_session(user, session_id=bad)),
        ("user_id", lambda: service.create_session(bad)),
        ("app_name", lambda: service.create_session(user, app_name=bad)),
        ("branch", lambda: service.append_message(session_id, UserMessage("x"), branch=bad)),
        (
            "id",
            lambda: service.append_event(
                SessionEvent(session_id=session_id, id=bad, message=UserMessage("x"))
            ),
        ),
        (
            "invocation_id",
            lambda: service.append_event(
                SessionEvent(session_id=session_id, message=UserMessage("x"), invocation_id=bad)
            ),
        ),
        ("session_id", lambda: service.append_message(bad, UserMessage("x"))),
    ]
    for name, call in creates:
        with pytest.raises(ValueError, match=f"^{name} (is {len(bad)} characters long|contains a NUL)"):
            call()
    assert service.list_sessions(user) == [service.get_session(session_id)]
    assert service.event_version(session_id) == 0


def test_looking_up_an_id_refuses_nul_and_takes_any_length(service: SessionService) -> None:
    user = unique("u")
    session_id = service.create_session(user).id
    lookups: list[tuple[str, Callable[[str], object]]] = [
        ("session_id", service.get_session),
        ("session_id", service.get_events),
        ("session_id", service.event_version),
        ("session_id", service.delete_session),
        ("user_id", service.list_sessions),
        ("app_name", lambda bad: service.list_sessions(user, app_name=bad)),
        ("before_invocation_id", lambda bad: service.rewind(session_id, bad)),
        ("branch", lambda bad: service.get_events(session_id, EventFilter.for_branch(bad))),
    ]
    for name, lookup in lookups:
        with pytest.raises(ValueError, match=f"^{name} contains a NUL character"):
            lookup("a\x00b")
    assert service.get_session(TOO_LONG) is None and service.get_events(TOO_LONG) == []
    assert service.list_sessions(TOO_LONG) == [] and service.list_sessions(user, app_name=TOO_LONG) == []
    assert service.get_events(session_id, EventFilter.for_branch(TOO_LONG)) == []
    with pytest.raises(LookupError):
        service.rewind(session_id, TOO_LONG)


def test_what_was_stored_before_these_rules_stays_readable(
    service: SessionService, database_url: str
) -> None:
    """Rows written before ids were bounded and NUL refused (built here through the ledger port,
    which trusts its caller) are read, listed and deleted as before."""
    if database_url.startswith("mysql"):
        pytest.skip("no MariaDB ledger predates the rules: its id columns were made to hold 255 characters")
    user = unique("u")
    old_id = unique("s") + "x" * MAX_ID_LENGTH
    service.ledger.create_session(Session(id=old_id, user_id=user), {})
    message = Message._trusted(
        MessageType.TOOL, "", (), (ToolResponse._trusted("c\x00", "f", "binary\x00output"),), {}
    )
    service.ledger.append(
        [event_draft(SessionEvent._trusted("e", old_id, T0, message, {}, None, False, None, {}))]
    )
    [listed] = service.list_sessions(user)
    assert listed.id == old_id and service.get_session(old_id) == listed
    [event] = service.get_events(old_id)
    assert event.message == message and event.message.tool_responses[0].content == "binary\x00output"
    service.delete_session(old_id)
    assert service.get_session(old_id) is None


# --- paging -------------------------------------------------------------------------------------------


def test_paging_at_the_edge_of_a_database_integer(service: SessionService) -> None:
    session_id = service.create_session(unique("u")).id
    for text in ("a", "b", "c"):
        service.append_message(session_id, UserMessage(text))

    def read(**window: int) -> list[str | None]:
        return [e.message.text for e in service.get_events(session_id, EventFilter(**window))]

    assert read(last_n=2**63 - 1) == ["a", "b", "c"]
    assert read(page=0, page_size=2**63 - 1) == ["a", "b", "c"]
    assert read(page=2**62 - 2, page_size=2) == []
    for window in ({"last_n": 2**63}, {"page": 2**63, "page_size": 1}, {"page": 2**62, "page_size": 2}):
        with pytest.raises(ValueError, match=r"2\*\*63 - 1"):
            read(**window)


# --- arguments of the wrong shape, and sizes --------------------------------------------------------


def test_arguments_of_the_wrong_shape_are_named(service: SessionService) -> None:
    user = unique("u")
    for name in ("state", "metadata"):
        with pytest.raises(ValueError, match=f"^{name}: expected a mapping, got list$"):
            service.create_session(user, **{name: [("k", "v")]})
    session_id = service.create_session(user).id
    for name in ("state_delta", "metadata"):
        with pytest.raises(ValueError, match=f"^{name}: expected a mapping, got list$"):
            service.append_message(session_id, UserMessage("x"), **{name: [("k", "v")]})
    with pytest.raises(ValueError, match=r"^ttl .* is out of range"):
        service.create_session(user, ttl=timedelta.max)
    for ttl in (timedelta.min, timedelta(0), -timedelta(minutes=1)):
        with pytest.raises(ValueError, match=r"^ttl must be positive \(None: never expires\), got "):
            service.create_session(user, ttl=ttl)
    assert [s.id for s in service.list_sessions(user)] == [session_id]
    assert service.event_version(session_id) == 0


def test_the_payload_limit_holds_for_a_created_session_as_for_an_event(service: SessionService) -> None:
    user = unique("u")
    for fields in ({"state": {"k": "x" * 5000}}, {"metadata": {"k": "x" * 5000}}):
        with pytest.raises(
            ValueError, match=r"^session '.*' is \d+ bytes as JSON, over the payload limit of 4000"
        ):
            service.create_session(user, **fields)
    assert service.list_sessions(user) == [] and service.get_user_state(user) == {}
    service.create_session(user, state={"k": "x" * 3000}, ttl=None)
    session_id = service.list_sessions(user)[0].id
    with pytest.raises(ValueError, match="over the payload limit of 4000"):
        service.append_message(session_id, UserMessage("x"), state_delta={"user:k": "x" * 5000})
    assert service.event_version(session_id) == 0
