"""A session id in use, or once used, is `SessionExists` (a `ValueError`) on every backend: from the
service with its one text whoever asks, from the ledger's create and restore with theirs, and
nothing is stored; on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sessionledger.domain import SessionExists, UserMessage
from sessionledger.domain.sessions import Session
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.audit.export import export_lines, import_lines

from sessionledger import SessionExists as top_level_session_exists


def taken_text(session_id: str) -> str:
    return (
        f"cannot create session {session_id!r}: session ids are unique across users and apps "
        "and this one cannot be used; leave session_id out for a new one"
    )


def test_creating_a_session_twice_is_session_exists_with_one_text_and_stores_nothing(
    service: SessionService, unique
) -> None:
    owner, sid = unique("u"), unique("s")
    service.create_session(owner, session_id=sid, state={"k": 1})
    service.append_message(sid, UserMessage("hello"))
    before = (service.get_session(sid), service.records(sid), service.get_user_state(owner))
    errors = []
    for user, app in ((owner, "default"), (unique("other"), "default"), (owner, unique("app"))):
        with pytest.raises(SessionExists) as raised:
            service.create_session(user, session_id=sid, app_name=app, state={"k": 2, "user:x": 1})
        errors.append(raised.value)
    assert all(isinstance(error, ValueError) for error in errors)
    assert {str(error) for error in errors} == {taken_text(sid)}  # it tells no one whose it is
    assert (service.get_session(sid), service.records(sid), service.get_user_state(owner)) == before


def test_a_deleted_sessions_id_is_session_exists_with_the_same_text(service: SessionService, unique) -> None:
    sid = unique("s")
    service.create_session(unique("u"), session_id=sid)
    service.delete_session(sid)
    records = service.records(sid)
    with pytest.raises(SessionExists) as raised:
        service.create_session(unique("u"), session_id=sid)
    assert str(raised.value) == taken_text(sid)
    assert service.get_session(sid) is None and service.records(sid) == records


def test_other_refusals_stay_plain_value_errors(service: SessionService, unique) -> None:
    with pytest.raises(ValueError) as raised:
        service.create_session(unique("u"), session_id=unique("s"), state={"k": object()})
    assert not isinstance(raised.value, SessionExists)


def test_the_ledgers_create_and_restore_raise_it_with_their_one_text(service: SessionService, unique) -> None:
    sid = unique("s")
    service.create_session(unique("u"), session_id=sid)
    records = service.records(sid)
    session = Session(id=sid, user_id=unique("u"), app_name="default", created_at=datetime.now(UTC))
    with pytest.raises(SessionExists) as created:
        service.ledger.create_session(session, {})
    with pytest.raises(SessionExists) as restored:
        import_lines(service, export_lines(service, sid))
    assert str(created.value) == str(restored.value) == str(SessionExists.taken(sid))
    assert str(SessionExists.taken(sid)) == f"session {sid!r} already exists (or existed and was deleted)"
    assert service.records(sid) == records


def test_it_is_exported_where_the_other_errors_are() -> None:
    assert top_level_session_exists is SessionExists
    assert issubclass(SessionExists, ValueError)
