"""The audit page over HTTP (Starlette's TestClient, in process) on memory, SQLite and PostgreSQL:
access (tokens, login cookie, 303/401), isolation in pages, JSON and downloads, and every page's
data checked against the ledger's own audit reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sessionledger.domain import UserMessage
from sessionledger.domain.access import Grant, issue
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import audit
from sessionledger.infrastructure.audit.digest import take_digest, write_digest
from sessionledger.infrastructure.audit.proof import check_proof
from sessionledger.infrastructure.bootstrap import Storage, open_storage
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.web import audit_app

from tests.conftest import SQL_BACKENDS, backend_url
from tests.fakes.audit_ledger import BOB_TEXT, MARKUP, SECRET_URL, AuditLedger, fill

JSON = {"Accept": "application/json"}


@dataclass
class Site:
    storage: Storage
    ledger: AuditLedger
    client: TestClient
    alice: dict[str, str]
    bob: dict[str, str]
    admin: dict[str, str]
    alice_token: str
    digests: Path


@pytest.fixture(params=["memory", *SQL_BACKENDS])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """The audit page over a fresh ledger of each backend: the pages list every session of a user
    and the whole ledger, so no other test's sessions may share its database."""
    database_url = backend_url(request, request.param)
    with open_storage(Settings(database_url=database_url)) as storage:
        ledger = fill(storage.service)
        headers = {}
        for name, grant in {
            "alice": Grant("alice"),
            "bob": Grant("bob"),
            "admin": Grant("root", True),
        }.items():
            token, stored = issue(grant, datetime.now(UTC))
            storage.access_tokens.add(stored)
            headers[name] = token
        digests = tmp_path / "digests"
        digests.mkdir()
        app = audit_app(
            storage.service, storage.access_tokens, database="postgresql://u:dbpass@h/x", digest_dir=digests
        )
        with TestClient(app) as client:
            yield Site(
                storage,
                ledger,
                client,
                *({"Authorization": f"Bearer {headers[n]}"} for n in ("alice", "bob", "admin")),
                headers["alice"],
                digests,
            )


def _routes(site: Site, session_id: str, event_id: str) -> list[str]:
    base = f"/sessions/{session_id}"
    return [
        base,
        f"{base}/records/1",
        f"{base}/window",
        f"{base}/window?version=1",
        f"{base}/events/{event_id}",
        f"{base}/verify",
        f"{base}/export",
        f"{base}/events/{event_id}/proof",
    ]


def _bob_event(site: Site) -> str:
    return next(r.event_id for r in site.storage.service.records(site.ledger.bob) if r.kind is Kind.EVENT)


def test_without_a_token_pages_go_to_login_and_json_is_401(site: Site) -> None:
    for path in ["/", "/ledger", *_routes(site, site.ledger.alice, site.ledger.reply)]:
        page = site.client.get(path, follow_redirects=False)
        assert (page.status_code, page.headers.get("location")) == (303, "/login"), path
        data = site.client.get(path, headers=JSON, follow_redirects=False)
        assert data.status_code == 401 and data.headers["www-authenticate"] == "Bearer", path
        wrong = site.client.get(path, headers={**JSON, "Authorization": "Bearer sl_0123456789abcdef_x"})
        assert wrong.status_code == 401


def test_another_users_session_is_404_in_pages_json_and_downloads(site: Site) -> None:
    for path in _routes(site, site.ledger.bob, _bob_event(site)):
        for headers in (site.alice, {**site.alice, **JSON}):
            answer = site.client.get(path, headers=headers)
            assert answer.status_code == 404, path
            assert BOB_TEXT not in answer.text and site.ledger.bob not in answer.text
        assert site.client.get(path, headers=site.bob).status_code == 200, path
        assert site.client.get(path, headers=site.admin).status_code == 200, path
    listed = site.client.get("/", headers={**site.alice, **JSON}).json()
    assert [s["id"] for s in listed["sessions"]] == [site.ledger.alice]
    assert site.client.get("/ledger", headers=site.alice).status_code == 404
    # Alice's event ids under Bob's session, and her deleted session: unknown alike
    assert (
        site.client.get(
            f"/sessions/{site.ledger.bob}/events/{site.ledger.reply}", headers=site.bob
        ).status_code
        == 404
    )
    assert site.client.get(f"/sessions/{site.ledger.alice_deleted}", headers=site.alice).status_code == 404


def test_an_admin_sees_every_users_sessions_and_a_deleted_sessions_history(site: Site) -> None:
    listed = site.client.get("/", headers={**site.admin, **JSON}).json()
    assert {site.ledger.alice, site.ledger.bob, site.ledger.alice_deleted} <= {
        s["id"] for s in listed["sessions"]
    } | {site.ledger.alice_deleted}
    deleted = site.client.get(f"/sessions/{site.ledger.alice_deleted}", headers={**site.admin, **JSON}).json()
    assert deleted["session"] is None
    assert deleted["entries"][-1]["kind"] == "erasure"
    assert (
        "forget me" not in site.client.get(f"/sessions/{site.ledger.alice_deleted}", headers=site.admin).text
    )


def test_the_login_form_sets_an_httponly_samesite_cookie_that_opens_the_pages(site: Site) -> None:
    refused = site.client.post("/login", data={"token": "sl_0123456789abcdef_wrong"}, follow_redirects=False)
    assert refused.status_code == 401 and "opens nothing" in refused.text
    for elsewhere in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},  # a sandboxed frame's form, or one posted through a cross-origin redirect
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port or subdomain of this host
    ):
        cross = site.client.post(
            "/login", data={"token": site.alice_token}, headers=elsewhere, follow_redirects=False
        )
        assert cross.status_code == 403 and "set-cookie" not in cross.headers, elsewhere
    own = {"Origin": str(site.client.base_url), "Sec-Fetch-Site": "same-origin"}
    assert site.client.post("/login", data={"token": site.alice_token}, headers=own).status_code == 200
    site.client.get("/logout")
    done = site.client.post("/login", data={"token": site.alice_token}, follow_redirects=False)
    assert (done.status_code, done.headers["location"]) == (303, "/")
    cookie = done.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "secure" not in cookie
    assert site.ledger.alice in site.client.get("/").text  # the client keeps the cookie
    assert site.client.get(f"/sessions/{site.ledger.bob}").status_code == 404
    site.client.get("/logout")
    assert site.client.get("/", follow_redirects=False).status_code == 303


def test_a_revoked_token_opens_nothing(site: Site) -> None:
    token_id = site.alice_token.split("_")[1]
    assert site.client.get("/", headers=site.alice).status_code == 200
    assert site.storage.access_tokens.revoke(token_id)
    assert site.client.get("/", headers={**site.alice, **JSON}).status_code == 401


def test_the_timeline_lists_exactly_the_records_the_ledger_holds(site: Site) -> None:
    sid = site.ledger.alice
    records = site.storage.service.records(sid)
    shown = site.client.get(f"/sessions/{sid}", headers={**site.alice, **JSON}).json()
    assert [(e["position"], e["version"], e["kind"], e["event_id"]) for e in shown["entries"]] == [
        (r.position, r.version, str(r.kind), r.event_id) for r in records
    ]
    described = [e.as_dict() for e in audit.timeline(site.storage.service, sid)]
    ids = ("archived_event_ids", "hidden_event_ids")  # a page lists those on the record's own page
    assert [e["details"] for e in shown["entries"]] == [
        {k: v for k, v in e["details"].items() if k not in ids} for e in described
    ]
    html = site.client.get(f"/sessions/{sid}", headers=site.alice).text
    assert html.count("<tr data-position=") == len(records)
    kinds = {e["kind"] for e in shown["entries"]}
    assert {"created", "event", "compaction", "rewind"} <= kinds


def test_a_compactions_page_shows_what_it_archived_and_the_summary_it_wrote(site: Site) -> None:
    sid = site.ledger.alice
    compaction = next(r for r in site.storage.service.records(sid) if r.kind is Kind.COMPACTION)
    page = site.client.get(
        f"/sessions/{sid}/records/{compaction.position}", headers={**site.alice, **JSON}
    ).json()
    assert [e["position"] for e in page["listed"]] == compaction.payload["archived"]
    assert any("morning departures" in s["text"] for s in page["summaries"])
    assert (
        "morning departures"
        in site.client.get(f"/sessions/{sid}/records/{compaction.position}", headers=site.alice).text
    )


def test_what_the_model_saw_for_a_reply_is_the_replayed_window_and_injected_summary(site: Site) -> None:
    sid, reply = site.ledger.alice, site.ledger.reply
    expected = audit.what_the_model_saw(site.storage.service, sid, reply)
    shown = site.client.get(f"/sessions/{sid}/events/{reply}", headers={**site.alice, **JSON}).json()
    saw = shown["model_saw"]
    assert [e["position"] for e in saw["before"]["window"]] == list(expected.before.positions)
    assert saw["facts"] == expected.facts and "morning departures" in saw["facts"]
    assert saw["before"]["version"] == expected.before.version


def test_the_window_at_any_version_is_the_replayed_one(site: Site) -> None:
    sid = site.ledger.alice
    latest = site.storage.service.event_version(sid)
    for version in range(latest + 1):
        shown = site.client.get(
            f"/sessions/{sid}/window?version={version}", headers={**site.alice, **JSON}
        ).json()
        assert [e["position"] for e in shown["window"]] == list(
            audit.replay(site.storage.service, sid, version=version).positions
        )
    bad = site.client.get(f"/sessions/{sid}/window?version={latest + 1}", headers={**site.alice, **JSON})
    assert bad.status_code == 400 and "outside" in bad.json()["error"]


def test_downloads_are_the_export_and_a_proof_that_checks_against_the_latest_digest(site: Site) -> None:
    sid = site.ledger.alice
    export = site.client.get(f"/sessions/{sid}/export", headers=site.alice)
    lines, expected = export.text.splitlines(), list(audit.export_lines(site.storage.service, sid))
    assert lines[1:] == expected[1:]  # the records; the header differs only in its export time
    assert json.loads(lines[0]) | {"exported_at": None} == json.loads(expected[0]) | {"exported_at": None}
    assert "attachment" in export.headers["content-disposition"]
    digest = take_digest(site.storage.service.ledger)
    write_digest(digest, site.digests / "digest-1.json")
    proof = site.client.get(f"/sessions/{sid}/events/{site.ledger.reply}/proof", headers=site.alice)
    assert check_proof(proof.text, digest).event.event_id == site.ledger.reply


def test_verify_shows_the_session_and_the_ledger_against_the_latest_digest(site: Site) -> None:
    sid = site.ledger.alice
    before = site.client.get(f"/sessions/{sid}/verify", headers={**site.alice, **JSON}).json()
    assert before["verification"]["ok"] and before["digest"]["digest"] is None
    write_digest(take_digest(site.storage.service.ledger), site.digests / "digest-1.json")
    after = site.client.get(f"/sessions/{sid}/verify", headers={**site.alice, **JSON}).json()
    assert after["digest"]["ok"] is True and after["digest"]["digest"]["name"] == "digest-1.json"
    ledger = site.client.get("/ledger", headers={**site.admin, **JSON}).json()
    assert ledger["ok"] is True and ledger["digest"]["name"] == "digest-1.json"
    (site.digests / "digest-3.json.partial").write_text("{half a dig")  # being written: left out
    assert site.client.get(f"/sessions/{sid}/verify", headers={**site.alice, **JSON}).json()["digest"]["ok"]
    (site.digests / "digest-2.json").write_text("{not a digest")  # the newest file: never passed over
    broken = site.client.get(f"/sessions/{sid}/verify", headers={**site.alice, **JSON}).json()
    assert broken["digest"]["digest"] is None and "digest-2.json" in broken["digest"]["problem"]


def test_verify_checks_what_was_written_since_the_digest_and_everything_on_request(site: Site) -> None:
    sid, service = site.ledger.alice, site.storage.service
    write_digest(take_digest(service.ledger), site.digests / "digest-1.json")
    vouched = len(service.records(sid))
    service.append_message(sid, UserMessage("since the digest"))
    since = site.client.get(f"/sessions/{sid}/verify", headers={**site.alice, **JSON}).json()
    assert (since["scope"], since["vouched"], since["digest"]["ok"]) == ("since", vouched, True)
    assert since["verification"]["ok"] and since["verification"]["records"] == vouched + 1
    everything = site.client.get(f"/sessions/{sid}/verify?all=1", headers={**site.alice, **JSON}).json()
    assert everything["scope"] == "all" and everything["verification"] == audit.verify(service, sid).as_dict()
    page = site.client.get(f"/sessions/{sid}/verify", headers=site.alice).text
    assert f"/sessions/{sid}/verify?all=1" in page and "takes longer" in page
    bob = site.client.get(f"/sessions/{site.ledger.bob}/verify?all=1", headers={**site.alice, **JSON})
    assert bob.status_code == 404


def test_no_page_renders_a_urls_password(site: Site) -> None:
    sid = site.ledger.alice
    event = next(
        r.event_id
        for r in site.storage.service.records(sid)
        if r.kind is Kind.EVENT and SECRET_URL in str(r.payload)
    )
    for path in [
        "/",
        f"/sessions/{sid}",
        f"/sessions/{sid}/window?version=9",
        f"/sessions/{sid}/events/{event}",
    ]:
        for headers in (site.alice, {**site.alice, **JSON}):
            text = site.client.get(path, headers=headers).text
            assert "hunter2-secret" not in text and "dbpass" not in text, path
    assert (
        "auditor:***@db.example"
        in site.client.get(f"/sessions/{sid}/events/{event}", headers=site.alice).text
    )


def test_sessions_are_searched_by_keyword_and_time(site: Site) -> None:
    def found(**query: str) -> list[str]:
        answer = site.client.get("/", params=query, headers={**site.admin, **JSON})
        assert answer.status_code == 200, answer.text
        return [s["id"] for s in answer.json()["sessions"]]

    assert found(q="harbour") == [site.ledger.bob]
    assert found(q="last train") == [site.ledger.alice]
    soon = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert found(q="harbour", since=soon) == []
    assert site.ledger.bob in found(until=soon)
    bad = site.client.get("/", params={"since": "yesterday"}, headers={**site.admin, **JSON})
    assert bad.status_code == 400 and "ISO-8601" in bad.json()["error"]


def test_text_that_is_markup_is_shown_escaped(site: Site) -> None:
    sid = site.ledger.alice
    html = site.client.get(f"/sessions/{sid}", headers=site.alice).text
    assert MARKUP not in html and "&lt;script&gt;" in html
    assert MARKUP in str(site.client.get(f"/sessions/{sid}", headers={**site.alice, **JSON}).json())


def test_a_session_id_with_slashes_and_reserved_characters_is_linked_and_served(site: Site) -> None:
    """An ADK session is app/user/id; any id is linked so that following the link finds it."""
    import re

    from sessionledger.domain import UserMessage

    odd = f"trains/alice/odd id?#%-{site.ledger.alice[:8]}"
    site.storage.service.create_session("alice", session_id=odd, app_name="trains")
    event = site.storage.service.append_message(odd, UserMessage("from an odd session")).id
    try:
        listed = site.client.get("/", headers=site.alice).text
        link = next(h for h in re.findall(r'href="(/sessions/[^"]+)"', listed) if "odd" in h)
        assert "?" not in link and "#" not in link
        page = site.client.get(link, headers={**site.alice, **JSON})
        assert page.status_code == 200 and page.json()["session_id"] == odd
        for tail in ("/window", "/verify", "/export", f"/events/{event}", f"/events/{event}/proof"):
            assert site.client.get(link + tail, headers=site.alice).status_code == 200, tail
        assert site.client.get(link, headers=site.bob).status_code == 404
    finally:
        site.storage.service.delete_session(odd)
