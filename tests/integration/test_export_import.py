"""Export, import, verify round trips on real ShareGPT conversations, and imports refused.

Sessions are built from the packaged ShareGPT conversations (`infrastructure.sharegpt` parses the
file conversation by conversation and stops at the first incomplete one), compacted with a
summary, rewound and token-counted, then exported from SQLite or PostgreSQL and imported into the
in-memory, SQLite and PostgreSQL ledgers.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sessionledger.domain import EventFilter, MessageType, SessionEvent, UserMessage
from sessionledger.domain.codec import event_to_payload
from sessionledger.domain.compaction import RecursiveSummarizationStrategy
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.audit import TamperedExport, export_lines, import_lines, replay, verify
from sessionledger.infrastructure.audit.export import (
    FORMAT,
    FORMAT_VERSION,
    bounded_lines,
    line_limit,
    record_to_dict,
)
from sessionledger.infrastructure.sharegpt import conversations

from tests.conftest import SQL_BACKENDS, sql_url
from tests.fakes.compaction import Always

CONVERSATIONS = 3


class FirstLines:
    """A summarizer that keeps the first line of the prompt's conversation (deterministic)."""

    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "Summary: " + user_prompt.strip().splitlines()[0][:200]


def load_conversations(service: SessionService) -> list[str]:
    """One session per conversation: every message, invocations per user turn, then audit events."""
    session_ids = []
    for n, conversation in enumerate(conversations(limit=CONVERSATIONS, min_messages=6)):
        session_id = service.create_session(
            f"user-{n}", app_name="sharegpt", metadata={"conversation": conversation.id}, state={"lang": "?"}
        ).id
        invocation = None
        for turn, message in enumerate(conversation.messages):
            if message.type is MessageType.USER:
                invocation = f"{conversation.id}-{turn}"
            service.append_event(
                SessionEvent(
                    session_id=session_id,
                    message=message,
                    invocation_id=invocation,
                    state_delta={"turns": turn, "user:seen": True},
                )
            )
        service.compact(
            session_id,
            Always(),
            RecursiveSummarizationStrategy(FirstLines(), max_events_to_keep=4, overlap_size=1),
        )
        window = service.get_events(session_id, EventFilter.active())
        last_invocation = window[-1].invocation_id
        if n == 0 and last_invocation:
            service.rewind(session_id, last_invocation)
        service.fill_token_counts(session_id, len)
        session_ids.append(session_id)
    assert len(session_ids) == CONVERSATIONS
    return session_ids


@pytest.fixture(params=SQL_BACKENDS)
def source(request: pytest.FixtureRequest) -> Iterator[tuple[SessionService, list[str]]]:
    url = sql_url(request, request.param, shared=True)
    with open_service(url) as service:
        yield service, load_conversations(service)


@pytest.fixture(params=["memory", *SQL_BACKENDS])
def target(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[SessionService]:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path / 'target.db'}"}.get(request.param)
    with open_service(url or sql_url(request, request.param)) as service:
        yield service


def everything(service: SessionService, session_id: str) -> dict[str, Any]:
    """What a session is, as the public API shows it."""
    session = service.get_session(session_id)
    assert session is not None
    return {
        "session": (
            session.user_id,
            session.app_name,
            session.created_at,
            session.expires_at,
            dict(session.metadata),
        ),
        "state": {k: v for k, v in session.state.items() if not k.startswith(("app:", "user:"))},
        "log": [(e.id, e.archived, event_to_payload(e)) for e in service.get_events(session_id)],
        "messages": service.get_messages(session_id),
        "version": service.event_version(session_id),
        "stats": service.window_stats(session_id),
    }


def test_round_trip_keeps_every_record_and_the_projection(
    source: tuple[SessionService, list[str]], target: SessionService
) -> None:
    service, session_ids = source
    for session_id in session_ids:
        lines = list(export_lines(service, session_id))
        imported = import_lines(target, lines)
        assert imported.session_id == session_id
        assert verify(target, session_id).ok, verify(target, session_id).findings
        original = [record_to_dict(r) for r in service.records(session_id)]
        restored = [record_to_dict(r) for r in target.records(session_id)]
        assert restored == original  # every hashed field, recorded_at and token counts too
        assert everything(target, session_id) == everything(service, session_id)
        assert replay(target, session_id).stand_ins == replay(service, session_id).stand_ins
        assert list(export_lines(target, session_id))[1:] == lines[1:]


def test_an_export_is_documented_json_lines(source: tuple[SessionService, list[str]]) -> None:
    service, session_ids = source
    lines = list(export_lines(service, session_ids[0]))
    header = json.loads(lines[0])
    records = [json.loads(line) for line in lines[1:]]
    assert header["format"] == FORMAT and header["format_version"] == FORMAT_VERSION
    assert header["session_id"] == session_ids[0] and header["records"] == len(records)
    assert (
        header["head_position"] == records[-1]["position"] and header["head_hash"] == records[-1]["row_hash"]
    )
    assert set(records[0]) == {
        "session_id", "position", "version", "kind", "event_id", "occurred_at", "recorded_at", "event_type",
        "branch", "synthetic", "token_count", "payload", "content_hash", "prev_hash", "row_hash",
    }  # fmt: skip
    assert [r["position"] for r in records] == list(range(1, len(records) + 1))
    assert {r["kind"] for r in records} >= {"created", "event", "compaction"}
    assert all("\n" not in line for line in lines)


def test_an_existing_session_is_refused(source: tuple[SessionService, list[str]]) -> None:
    service, session_ids = source
    before = service.records(session_ids[0])
    with pytest.raises(ValueError, match="already exists"):
        import_lines(service, export_lines(service, session_ids[0]))
    assert service.records(session_ids[0]) == before


def _edit(lines: list[str], position: int, change: Any) -> list[str]:
    edited = list(lines)
    record = json.loads(edited[position])
    change(record)
    edited[position] = json.dumps(record, ensure_ascii=False)
    return edited


def test_tampered_exports_are_refused_naming_the_break(source: tuple[SessionService, list[str]]) -> None:
    service, session_ids = source
    lines = list(export_lines(service, session_ids[1]))
    event_line = next(i for i, line in enumerate(lines[1:], start=1) if json.loads(line)["kind"] == "event")
    header = json.loads(lines[0])

    def reword(record: dict[str, Any]) -> None:
        record["payload"]["message"]["text"] = "something the model never saw"

    cases = {
        "edited": _edit(lines, event_line, reword),
        "deleted": [
            json.dumps({**header, "records": header["records"] - 1}),
            *lines[1:event_line],
            *lines[event_line + 1 :],
        ],
        "reordered": _edit(
            _edit(lines, event_line, lambda r: r.update(position=r["position"] + 1)),
            event_line + 1,
            lambda r: r.update(position=r["position"] - 1),
        ),
    }
    with open_service("memory://") as target:
        for kind, tampered in cases.items():
            with pytest.raises(TamperedExport) as refused:
                import_lines(target, tampered)
            assert refused.value.found.kind == kind
            assert target.records(session_ids[1]) == []


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty"),
        (["not json"], "not JSON"),
        ([json.dumps({"format": "something else"})], "not a sessionledger export"),
        ([json.dumps({"format": FORMAT, "format_version": 99})], "unsupported export format_version"),
    ],
)
def test_what_is_not_an_export_is_refused(lines: list[str], message: str) -> None:
    with open_service("memory://") as target, pytest.raises(ValueError, match=message):
        import_lines(target, lines)


def test_a_deleted_session_exports_no_content_and_is_not_imported(
    source: tuple[SessionService, list[str]],
) -> None:
    service, session_ids = source
    session_id = session_ids[2]
    texts = [
        e.message.text for e in service.get_events(session_id) if e.message.text and len(e.message.text) > 20
    ]
    service.delete_session(session_id)
    lines = list(export_lines(service, session_id))
    exported = "\n".join(lines)
    assert texts and not any(text in exported for text in texts)
    records = [json.loads(line) for line in lines[1:]]
    assert records[-1]["kind"] == Kind.ERASURE and json.loads(lines[0])["deleted"] is True
    assert all(r["payload"] is None for r in records if r["kind"] in ("created", "event", "rewind"))
    with open_service("memory://") as target, pytest.raises(ValueError, match="was deleted"):
        import_lines(target, lines)


def test_an_export_of_the_largest_payload_fits_the_line_limit_and_a_longer_line_is_refused(
    tmp_path: Path,
) -> None:
    """The limit is what the ledger can hold: an event at the payload limit exports to a line
    within it (and imports back through the bounded reader); one character more than the limit
    is refused, having read no more than the limit and one."""
    limit = 4096
    with open_service("memory://", max_payload_bytes=limit) as service:
        session_id = service.create_session("alice").id
        for size in range(limit, 0, -1):  # the longest text whose event is within the payload limit
            try:
                service.append_message(session_id, UserMessage("x" * size))
                break
            except ValueError:
                continue
        assert size > limit - 1000
        dump = tmp_path / "export.jsonl"
        dump.write_text("\n".join(export_lines(service, session_id)) + "\n", encoding="utf-8")
    with dump.open(encoding="utf-8") as stream, open_service("memory://") as target:
        assert import_lines(target, bounded_lines(stream, line_limit(limit))).records == 2
    endless = io.StringIO("x" * (line_limit(limit) + 10))
    with pytest.raises(ValueError, match="line 1 is longer than"):
        list(bounded_lines(endless, line_limit(limit)))
    assert endless.tell() == line_limit(limit) + 1
    exact = "y" * line_limit(limit)
    assert list(bounded_lines(io.StringIO(f"{exact}\n{exact}"), line_limit(limit))) == [f"{exact}\n", exact]
