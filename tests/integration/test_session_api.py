"""The HTTP session API (`/api/v1/`) over HTTP (httpx against the ASGI app, in process) on memory,
SQLite and PostgreSQL: sessions, conditional and idempotent appends, state, recall, the token's
rights (401, 403 for a read-only token), isolation (another user's session is 404), bad input
(one 4xx message, nothing stored) and the body limit; the served OpenAPI document is docs/'s."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient
from sessionledger.domain.access import Grant, StoredToken, issue
from sessionledger.domain.codec import event_document
from sessionledger.domain.filters import EventFilter
from sessionledger.infrastructure.bootstrap import Storage, open_storage
from sessionledger.infrastructure.loop_appends import LoopAppends
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.web import audit_app
from sessionledger.workers.web.session_api import ENVELOPE_BYTES

from tests.integration.test_async_append import drop_loop_connections

OPENAPI = Path(__file__).parents[2] / "docs" / "http-api.openapi.json"
LIMIT = 4096


@dataclass
class Api:
    storage: Storage
    client: TestClient
    app: str
    alice: dict[str, str]
    bob: dict[str, str]
    reader: dict[str, str]

    def url(self, rest: str = "") -> str:
        return f"/api/v1/apps/{self.app}/sessions{rest}"

    def append(
        self, session_id: str, event: dict, expected_version: int | None, who: dict[str, str] | None = None
    ):
        body = {"event": event, "expected_version": expected_version}
        return self.client.post(self.url(f"/{session_id}/events"), json=body, headers=who or self.alice)


@pytest.fixture
def api(database_url: str) -> Iterator[Api]:
    settings = Settings(database_url=database_url, max_payload_bytes=LIMIT)
    with open_storage(settings) as storage:
        headers = {}
        for name, grant in {
            "alice": Grant("alice", write=True),
            "bob": Grant("bob", write=True),
            "reader": Grant("alice"),
        }.items():
            token, stored = issue(grant, datetime.now(UTC))
            storage.access_tokens.add(stored)
            headers[name] = {"Authorization": f"Bearer {token}"}
        app = f"app-{uuid4().hex[:12]}"  # ids are never used again: a fresh app per test
        loop_appends = storage.loop_appends()  # as `serve` has it (PostgreSQL, MariaDB: on the loop)
        web = audit_app(
            storage.service, storage.access_tokens, writer=storage.service, loop_appends=loop_appends
        )
        try:
            with TestClient(web) as client:
                yield Api(storage, client, app, headers["alice"], headers["bob"], headers["reader"])
        finally:
            if loop_appends is not None:
                loop_appends.close()
        for user in ("alice", "bob"):  # the shared PostgreSQL database: leave no session behind
            for session in storage.service.list_sessions(user, app_name=app):
                storage.service.delete_session(session.id)


def _user(text: str, event_id: str | None = None, **fields) -> dict:
    return {**({"id": event_id} if event_id else {}), "message": {"type": "user", "text": text}, **fields}


def test_a_session_is_created_read_listed_ended_and_deleted(api: Api) -> None:
    state = {"k": 1, "app:shared": "a", "user:lang": "en", "temp:scratch": True}
    created = api.client.post(api.url(), json={"session_id": "s1", "state": state}, headers=api.alice)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["id"], body["user_id"], body["version"], body["events"]) == ("s1", "alice", 0, [])
    assert body["state"] == {"k": 1, "app:shared": "a", "user:lang": "en"}
    assert body["ledger_id"] == f"{api.app}/alice/s1"
    assert api.client.post(api.url(), json={"session_id": "s1"}, headers=api.alice).status_code == 409

    fresh = api.client.post(api.url(), json={}, headers=api.alice).json()["id"]
    listed = api.client.get(api.url(), headers=api.alice).json()["sessions"]
    assert [s["id"] for s in listed] == ["s1", fresh] and all("events" not in s for s in listed)

    assert api.append("s1", _user("hello", "e1"), 0).status_code == 201
    ended = api.client.post(api.url("/s1/end"), headers=api.alice)
    assert ended.status_code == 200 and [e["id"] for e in ended.json()["events"]] == ["e1"]
    assert api.client.get(api.url("/s1"), headers=api.alice).status_code == 200  # end deletes nothing

    assert api.client.delete(api.url("/s1"), headers=api.alice).status_code == 204
    assert api.client.get(api.url("/s1"), headers=api.alice).status_code == 404
    assert api.client.delete(api.url("/s1"), headers=api.alice).status_code == 204  # a no-op now
    assert api.storage.service.get_events(body["ledger_id"]) == []


def test_appends_are_conditional_and_idempotent_and_reads_take_recent_and_after(api: Api) -> None:
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    times = [f"2026-01-01T00:00:0{i}+00:00" for i in range(3)]
    for version, moment in enumerate(times):
        answer = api.append("s", _user(f"m{version}", f"e{version}", timestamp=moment), version)
        assert answer.status_code == 201 and answer.json()["version"] == version + 1
    ledger_id = f"{api.app}/alice/s"
    before = api.storage.service.get_events(ledger_id)

    again = api.append("s", _user("m0", "e0"), 0)  # a retry of a stored append: stale, yet 200
    assert again.status_code == 200 and again.json()["stored"] is False
    stale = api.append("s", _user("late", "e9"), 1)
    assert stale.status_code == 409 and "event_version 1" in stale.json()["error"]
    assert api.storage.service.get_events(ledger_id) == before  # neither stored anything

    read = api.client.get(api.url("/s"), params={"num_recent_events": 2}, headers=api.alice).json()
    assert [e["id"] for e in read["events"]] == ["e1", "e2"] and read["version"] == 3
    for recent, ids in ((5, ["e0", "e1", "e2"]), (0, [])):  # more than there are: all of them
        read = api.client.get(api.url("/s"), params={"num_recent_events": recent}, headers=api.alice).json()
        assert [e["id"] for e in read["events"]] == ids
    after = datetime.fromisoformat(times[1]).timestamp()
    read = api.client.get(api.url("/s"), params={"after": after}, headers=api.alice).json()
    assert [e["id"] for e in read["events"]] == ["e1", "e2"]
    assert read["events"] == [event_document(e) for e in before[1:]]  # `events --json`'s form
    assert read["last_update_time"] == after + 1


def test_state_deltas_reach_the_user_state_and_recall_finds_archived_and_other_sessions(api: Api) -> None:
    for sid in ("a", "b"):
        api.client.post(api.url(), json={"session_id": sid}, headers=api.alice)
    api.append("a", _user("the blue whale", "e1", state_delta={"user:color": "blue", "temp:x": 1}), 0)
    api.append("b", _user("a red fox", "e2"), 0)
    state = api.client.get(f"/api/v1/apps/{api.app}/state", headers=api.alice).json()
    assert state == {"user_id": "alice", "state": {"color": "blue"}}
    assert api.client.get(api.url("/b"), headers=api.alice).json()["state"] == {"user:color": "blue"}

    search = f"/api/v1/apps/{api.app}/search"
    one = api.client.get(search, params={"q": "whale", "session_id": "a"}, headers=api.alice).json()
    assert [r["text"] for r in one["results"]] == ["the blue whale"]
    assert api.client.get(search, params={"q": "fox", "session_id": "a"}, headers=api.alice).json() == {
        "results": []
    }
    every = api.client.get(search, params={"q": "whale,fox"}, headers=api.alice).json()["results"]
    assert sorted(r["text"] for r in every) == ["a red fox", "the blue whale"]
    assert api.client.get(search, params={"q": "whale"}, headers=api.bob).json() == {"results": []}


def test_another_users_session_is_404_for_every_route_and_unchanged(api: Api) -> None:
    api.client.post(api.url(), json={"session_id": "mine", "state": {"secret": 1}}, headers=api.alice)
    api.append("mine", _user("private", "e1"), 0)
    ledger_id = f"{api.app}/alice/mine"
    before = api.storage.service.get_events(ledger_id)
    for method, path in (("GET", ""), ("POST", "/end")):
        assert api.client.request(method, api.url(f"/mine{path}"), headers=api.bob).status_code == 404
    assert api.append("mine", _user("intrusion", "e2"), 1, who=api.bob).status_code == 404
    assert api.client.delete(api.url("/mine"), headers=api.bob).status_code == 204  # bob's own "mine": none
    assert api.client.get(api.url(), headers=api.bob).json() == {"sessions": []}
    search = f"/api/v1/apps/{api.app}/search"
    assert api.client.get(search, params={"session_id": "mine"}, headers=api.bob).status_code == 404
    # bob may have a session of the same name: his own, apart from alice's
    assert api.client.post(api.url(), json={"session_id": "mine"}, headers=api.bob).status_code == 201
    assert api.client.get(api.url("/mine"), headers=api.bob).json()["state"] == {}
    assert api.storage.service.get_events(ledger_id) == before
    assert api.storage.service.get_session(ledger_id) is not None


def test_a_read_only_token_reads_but_every_write_is_403_and_no_token_is_401(api: Api) -> None:
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    assert api.client.get(api.url("/s"), headers=api.reader).status_code == 200
    writes = [
        ("POST", api.url(), {"session_id": "t"}),
        ("POST", api.url("/s/events"), {"event": _user("x"), "expected_version": 0}),
        ("POST", api.url("/s/end"), None),
        ("DELETE", api.url("/s"), None),
    ]
    for method, path, body in writes:
        answer = api.client.request(method, path, json=body, headers=api.reader)
        assert answer.status_code == 403 and "--write" in answer.json()["error"]
    assert api.storage.service.event_version(f"{api.app}/alice/s") == 0
    assert api.client.get(api.url("/s"), headers=api.reader).status_code == 200  # not deleted
    for headers in ({}, {"Authorization": "Bearer sl_0123456789abcdef_wrong"}, {"Cookie": "x=y"}):
        assert api.client.get(api.url(), headers=headers).status_code == 401


def test_an_append_checks_its_token_before_its_body_and_a_revoked_token_at_once(api: Api) -> None:
    """The append checks the token itself (on a thread, or from the event loop: `loop_appends.py`),
    not in a dependency: still 401 before the body is looked at, and a token revoked a moment ago
    writes nothing."""
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    token, stored = issue(Grant("alice", write=True), datetime.now(UTC))
    api.storage.access_tokens.add(stored)
    mine = {"Authorization": f"Bearer {token}"}
    assert api.append("s", _user("before", "e1"), 0, who=mine).status_code == 201
    assert api.storage.access_tokens.revoke(stored.token_id)
    wrong = {"Authorization": "Bearer sl_0123456789abcdef_wrong"}
    for headers in ({}, wrong, mine):
        for body in ({"event": _user("after"), "expected_version": 1}, {"event": "not an event"}):
            answer = api.client.post(api.url("/s/events"), json=body, headers=headers)
            assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer"
    assert api.storage.service.event_version(f"{api.app}/alice/s") == 1


def test_a_token_known_to_the_loop_is_refused_at_its_next_append_once_revoked(
    api: Api, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token that opened an append on the event loop is remembered, its next appends sent with no
    read of it (one round trip: `loop_appends.py`); revoked between two appends, the next is 401
    and stores nothing (the append's own statement checks it), with a wrong secret or a bad body as
    well, and the token is forgotten: read again at each request."""
    on_loop = database_url.startswith(("postgresql", "mysql"))
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    token, stored = issue(Grant("alice", write=True), datetime.now(UTC))
    api.storage.access_tokens.add(stored)
    mine = {"Authorization": f"Bearer {token}"}
    loop_reads: list[str] = []
    find_token = LoopAppends.find_token

    async def counted(self: LoopAppends, token_id: str) -> StoredToken | None:
        loop_reads.append(token_id)
        return await find_token(self, token_id)

    monkeypatch.setattr(LoopAppends, "find_token", counted)
    for version in range(2):  # the first on a thread (the owner), the second on the loop, remembered
        assert api.append("s", _user(f"m{version}"), version, who=mine).status_code == 201
    assert loop_reads == [stored.token_id] * (2 if on_loop else 0)
    loop_reads.clear()
    for version in range(2, 4):
        assert api.append("s", _user(f"m{version}"), version, who=mine).status_code == 201
    assert loop_reads == []
    assert api.storage.access_tokens.revoke(stored.token_id)
    wrong = {"Authorization": f"Bearer sl_{stored.token_id}_wrong"}
    for headers in (wrong, mine, mine):
        for body in ({"event": _user("after"), "expected_version": 4}, {"event": "not an event"}):
            answer = api.client.post(api.url("/s/events"), json=body, headers=headers)
            assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer"
    assert api.storage.service.event_version(f"{api.app}/alice/s") == 4
    assert loop_reads == [stored.token_id] * (3 if on_loop else 0)  # forgotten once an append was refused
    assert api.append("s", _user("alice's own"), 4).status_code == 201  # her other token still writes


def test_the_common_append_is_made_on_the_event_loop(
    api: Api, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL and MariaDB (`Storage.loop_appends`) a conditional append to a session whose
    owner is known reads its token and appends from the event loop: neither the synchronous
    service nor the token store is called (no hop to a thread). The rest still goes there: a
    session's first append (its owner read), a stale one (409), one without `expected_version`."""
    on_loop = database_url.startswith(("postgresql", "mysql"))
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    synchronous: list[str] = []
    for target, name in ((api.storage.service, "append_event"), (api.storage.access_tokens, "find")):
        original = getattr(target, name)
        monkeypatch.setattr(
            target, name, lambda *a, _o=original, _n=name, **k: synchronous.append(_n) or _o(*a, **k)
        )
    assert api.append("s", _user("first"), 0).status_code == 201  # the owner is read: on a thread
    assert synchronous == ["find", "append_event"]
    for version in range(1, 4):
        answer = api.append("s", _user(f"m{version}"), version)
        assert answer.status_code == 201 and answer.json()["version"] == version + 1
    assert synchronous == ["find", "append_event"] * (1 if on_loop else 4)
    synchronous.clear()
    assert api.append("s", _user("stale"), 1).status_code == 409
    assert api.append("s", _user("any version"), None).status_code == 201
    assert synchronous == ["find", "append_event"] * 2
    assert [e.message.text for e in api.storage.service.get_events(f"{api.app}/alice/s")][-1] == "any version"


def test_an_append_whose_token_the_loop_cannot_read_is_made_on_a_thread(
    api: Api, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop connection the server dropped fails the token's read (`AsyncAppend.read`): that
    append is made whole on a thread, and the next one on the loop again, on a new connection."""
    if not database_url.startswith("postgresql"):
        pytest.skip("dropping only the loop's connections: PostgreSQL tells them apart")
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    for version in range(2):  # the first on a thread (the owner), the second on the loop
        assert api.append("s", _user(f"m{version}"), version).status_code == 201
    drop_loop_connections(database_url)
    synchronous: list[str] = []
    original = api.storage.access_tokens.find
    monkeypatch.setattr(
        api.storage.access_tokens, "find", lambda *a: synchronous.append("find") or original(*a)
    )
    assert api.append("s", _user("m2"), 2).status_code == 201
    assert synchronous == ["find"]
    assert api.append("s", _user("m3"), 3).status_code == 201
    assert synchronous == ["find"]
    assert api.storage.service.event_version(f"{api.app}/alice/s") == 4


def test_an_append_reads_its_sessions_owner_once_and_a_deleted_session_refuses_it(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner is checked at a session's first append only (`owned_sessions.py`); the token at
    every one. A session deleted since is still refused by the append itself: 404, nothing stored."""
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    service = api.storage.service
    reads = []
    read_session = service.get_session
    monkeypatch.setattr(service, "get_session", lambda *a, **k: reads.append(a) or read_session(*a, **k))
    for version in range(3):
        assert api.append("s", _user(f"m{version}"), version).status_code == 201
    assert len(reads) == 1
    assert api.append("s", _user("intrusion"), 3, who=api.bob).status_code == 404  # bob's "s": none
    service.delete_session(f"{api.app}/alice/s")
    for expected in (3, None):
        answer = api.append("s", _user("after the delete"), expected)
        assert answer.status_code == 404, answer.text
    assert service.get_events(f"{api.app}/alice/s", EventFilter.all()) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"event": {"message": {"type": "robot"}}}, "unknown message type"),
        ({"event": {"message": {"type": "user", "txt": "x"}}}, "unknown field 'txt'"),
        ({"event": {"message": {"type": "user"}, "colour": 1}}, "unknown field 'colour'"),
        ({"event": {"text": "no message"}}, "unknown field 'text'"),
        ({"event": {"message": {"type": "user"}, "timestamp": "yesterday"}}, "yesterday"),
        ({"event": {"message": {"type": "user"}, "metadata": {"n": 2**70}}}, "beyond 64 bits"),
        ({"event": {"message": {"type": "user"}}, "expected_version": -1}, "expected_version"),
        ({"event": {"message": {"type": "user"}, "session_id": "other"}}, "another session"),
        ({"expected_version": 0}, "event: Field required"),
    ],
)
def test_bad_events_are_400_with_one_message_and_store_nothing(api: Api, body: dict, expected: str) -> None:
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    answer = api.client.post(api.url("/s/events"), json=body, headers=api.alice)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]
    assert expected in message and "\n" not in message
    assert api.storage.service.event_version(f"{api.app}/alice/s") == 0


def test_bad_requests_are_4xx_with_one_message(api: Api) -> None:
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    cases = [
        (api.client.get(api.url("/s"), params={"num_recent_events": "x"}, headers=api.alice), 400),
        (api.client.get(api.url("/s"), params={"after": "soon"}, headers=api.alice), 400),
        (api.client.post(api.url(), content=b"{not json", headers=api.alice), 400),
        (api.client.post(api.url(), json=[1], headers=api.alice), 400),
        (api.client.post(api.url(), json={"session_id": "", "state": {}}, headers=api.alice), 400),
        (api.client.post(api.url(), content=b'{"state": {"k": NaN}}', headers=api.alice), 400),
        (api.client.post(api.url(), json={"owner": "bob"}, headers=api.alice), 400),
        (api.client.get(api.url("/missing"), headers=api.alice), 404),
    ]
    for answer, status in cases:
        assert answer.status_code == status, answer.text
        assert isinstance(answer.json()["error"], str) and "\n" not in answer.json()["error"]
    assert [s["id"] for s in api.client.get(api.url(), headers=api.alice).json()["sessions"]] == ["s"]


def test_a_body_over_the_limit_is_413_before_it_is_read_whole(api: Api) -> None:
    api.client.post(api.url(), json={"session_id": "s"}, headers=api.alice)
    limit = LIMIT + ENVELOPE_BYTES
    big = {"event": _user("x" * (limit + 10)), "expected_version": 0}
    declared = api.client.post(api.url("/s/events"), json=big, headers=api.alice)
    assert declared.status_code == 413 and str(limit) in declared.json()["error"]

    # no Content-Length: counted as it streams in, and refused at the first chunk past the limit
    chunks_read = asyncio.run(_post_chunked(api, api.url("/s/events"), chunk=1024, chunks=100))
    assert chunks_read == limit // 1024 + 1
    # under the envelope limit, yet over the ledger's payload limit: the ledger's 400
    payload = api.append("s", _user("y" * (LIMIT + 10)), 0)
    assert payload.status_code == 400 and "payload" in payload.json()["error"]
    assert api.storage.service.get_events(f"{api.app}/alice/s", EventFilter.all()) == []


async def _post_chunked(api: Api, path: str, *, chunk: int, chunks: int) -> int:
    """POST `chunks` chunks of `chunk` bytes with no Content-Length straight to the ASGI app; how
    many the app read before it answered 413."""
    read = 0
    answer: list[int] = []

    async def receive() -> dict:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": b"x" * chunk, "more_body": read < chunks}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            answer.append(message["status"])

    token = api.alice["Authorization"].encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": [(b"authorization", token), (b"content-type", b"application/json")],
        "server": ("test", 80), "client": ("test", 1),
    }  # fmt: skip
    await api.client.app(scope, receive, send)  # type: ignore[operator]
    assert answer == [413]
    return read


def test_the_served_openapi_document_is_the_one_in_docs(api: Api) -> None:
    served = api.client.get("/api/v1/openapi.json")
    assert served.status_code == 200
    assert served.json() == json.loads(OPENAPI.read_text()), (
        "docs/http-api.openapi.json is behind: python -m sessionledger.workers.web.openapi_document > it"
    )
    paths = served.json()["paths"]
    assert "/apps/{app}/sessions/{session_id}/events" in paths
    assert "requestBody" in paths["/apps/{app}/sessions/{session_id}/events"]["post"]
