"""`open_service(compaction="background")`: the workers' evaluate and compact on a thread of the
application, with real threads, real subprocesses and real databases."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from sessionledger.domain import AssistantMessage, SessionEvent, UserMessage
from sessionledger.domain.entries import Entry
from sessionledger.domain.filters import EventFilter
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.async_service import open_async_service
from sessionledger.infrastructure.audit.verify import verify

from tests.conftest import SQL_BACKENDS, sql_url
from tests.e2e.test_readme import README, fenced_blocks, run_block

POLICY = """
apps.default.trigger = { type = "turns", max_turns = 4 }
apps.default.strategy = { type = "sliding", max_events = 4 }
"""


@pytest.fixture(params=SQL_BACKENDS)
def durable_url(request) -> str:
    return sql_url(request, request.param)


def compactions(service, session_id: str) -> int:
    return [record.kind for record in service.records(session_id)].count("compaction")


def append_turns(service, session_id: str, turns: int, tag: str = "") -> list[str]:
    ids = []
    for turn in range(turns):
        ids.append(service.append_message(session_id, UserMessage(f"question {tag}{turn}")).id)
        ids.append(service.append_message(session_id, AssistantMessage(f"answer {tag}{turn}")).id)
    return ids


def assert_intact(service, session_id: str, appended: list[str]) -> None:
    """Every appended event in the ledger once, in order; the chain and the window verify."""
    stored = [event.id for event in service.get_events(session_id) if not event.is_synthetic]
    assert stored == appended, session_id
    assert verify(service, session_id).ok, session_id
    window = [e.id for e in service.get_events(session_id, EventFilter.active()) if not e.is_synthetic]
    assert window == appended[len(appended) - len(window) :], "the window is the latest events"


def test_fifty_sessions_appended_from_threads_while_it_compacts_lose_no_event(durable_url):
    appended: dict[str, list[str]] = {}
    with open_service(durable_url, compaction="background", policy=POLICY) as service:
        sessions = [service.create_session(f"user-{n % 5}").id for n in range(50)]

        def write(mine: list[str]) -> None:
            for turn in range(8):  # past the policy's 4 turns, interleaved with the compactions
                for session_id in mine:
                    appended.setdefault(session_id, []).extend(
                        append_turns(service, session_id, 1, f"{turn}-")
                    )

        threads = [threading.Thread(target=write, args=(sessions[n::4],)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    with open_service(durable_url) as service:
        for session_id in sessions:
            assert_intact(service, session_id, appended[session_id])
            assert compactions(service, session_id) >= 1, session_id
            assert len(service.get_messages(session_id)) < 16, "compacted below the 8 turns appended"


CHILD = textwrap.dedent(
    """
    import sys
    from sessionledger.domain import UserMessage
    from sessionledger.infrastructure import open_service

    url, policy, tag, *sessions = sys.argv[1:]
    with open_service(url, compaction="background", policy=policy) as service:
        for session_id in sessions:
            service.append_message(session_id, UserMessage(f"one more from {tag}"))
    """
)


def test_two_processes_on_one_database_compact_each_session_once(durable_url):
    """Each process is told of every session and finds it due; the lease and the version check
    let one compaction through per session."""
    with open_service(durable_url) as service:  # the workers' mode: nothing compacts here
        sessions = [service.create_session("user").id for _ in range(10)]
        for session_id in sessions:
            append_turns(service, session_id, 6)
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, durable_url, POLICY, tag, *sessions])
        for tag in ("a", "b")
    ]
    assert [child.wait(timeout=180) for child in children] == [0, 0]
    with open_service(durable_url) as service:
        assert [compactions(service, session_id) for session_id in sessions] == [1] * 10
        assert all(verify(service, session_id).ok for session_id in sessions)


def test_closing_drains_a_compaction_due_at_close(durable_url, tmp_path):
    """Closed at once after the append that makes it due: the compaction is done by the close
    (the policy given as a file's path this time)."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    with open_service(durable_url, compaction="background", policy=str(path)) as service:
        session_id = service.create_session("user").id
        appended = append_turns(service, session_id, 6)
    with open_service(durable_url) as service:
        assert compactions(service, session_id) == 1
        assert_intact(service, session_id, appended)


def test_a_batch_ingested_is_compacted_as_appends_are(durable_url):
    """`ingest` (the workers' batch path, any sessions in one transaction) tells the compactor too."""
    with open_service(durable_url, compaction="background", policy=POLICY) as service:
        sessions = [service.create_session("user").id for _ in range(3)]
        batch = [
            SessionEvent(session_id=session_id, message=message(f"{kind} {turn}"))
            for turn in range(6)
            for session_id in sessions
            for kind, message in (("question", UserMessage), ("answer", AssistantMessage))
        ]
        service.ingest(batch)
    with open_service(durable_url) as service:
        assert [compactions(service, session_id) for session_id in sessions] == [1, 1, 1]
        for session_id in sessions:
            assert_intact(service, session_id, [e.id for e in batch if e.session_id == session_id])


def turn_events(session_id: str, turn: int) -> list[SessionEvent]:
    return [
        SessionEvent(session_id=session_id, message=UserMessage(f"q{turn}")),
        SessionEvent(session_id=session_id, message=AssistantMessage(f"a{turn}")),
    ]


def test_an_adapters_append_of_messages_is_compacted_as_appends_are(durable_url):
    """`append_entries` (the LangGraph saver's and the other adapters' append) tells the compactor
    of the messages it stores; entries alone and a repeated message tell it nothing new."""
    with open_service(durable_url, compaction="background", policy=POLICY) as service:
        session_id = service.create_session("user").id
        batches = [turn_events(session_id, turn) for turn in range(6)]
        for events in batches:
            service.append_entries(session_id, [Entry("note", "k", {"n": 1})], events=events)
        service.append_entries(session_id, [], events=batches[-1])  # duplicates: nothing stored
    with open_service(durable_url) as service:
        assert compactions(service, session_id) == 1
        assert_intact(service, session_id, [e.id for events in batches for e in events])


@pytest.mark.parametrize("through", ["append_message", "append_entries"])
def test_the_async_twin_compacts_appends_made_from_an_event_loop(durable_url, through):
    """On PostgreSQL its appends (a message, or an adapter's `append_entries` through
    `append_on_head`) are sent from the loop itself, without the service's threads."""

    async def main() -> tuple[str, list[str]]:
        async with open_async_service(durable_url, compaction="background", policy=POLICY) as service:
            session_id = (await service.create_session("user")).id
            ids = []
            for turn in range(6):
                events = turn_events(session_id, turn)
                if through == "append_entries":
                    await service.append_entries(session_id, [], events=events)
                    ids.extend(e.id for e in events)
                else:
                    for event in events:
                        ids.append((await service.append_message(session_id, event.message)).id)
            return session_id, ids

    session_id, appended = asyncio.run(main())
    with open_service(durable_url) as service:
        assert compactions(service, session_id) == 1
        assert_intact(service, session_id, appended)


@pytest.mark.parametrize(
    "options", [{}, {"compaction": "workers"}, {"compaction": "workers", "policy": POLICY}]
)
def test_the_workers_mode_compacts_nothing_in_the_process(sqlite_url, options):
    with open_service(sqlite_url, **options) as service:
        assert service.append_steps.appended is None
        session_id = service.create_session("user").id
        append_turns(service, session_id, 6)
        time.sleep(0.3)
    with open_service(sqlite_url) as service:
        assert compactions(service, session_id) == 0


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"compaction": "nonsense"}, "compaction must be one of 'workers', 'background', not 'nonsense'"),
        ({"compaction": "background", "policy": "apps.default = 3"}, "apps.default must be a table"),
        ({"compaction": "background", "policy": "/nowhere/policy.toml"}, "cannot read policy file"),
    ],
)
def test_a_bad_mode_or_policy_is_a_one_line_value_error_at_open(sqlite_url, options, says):
    for opener in (open_service, open_async_service):
        with pytest.raises(ValueError, match=says) as raised:
            opener(sqlite_url, **options)
        assert "\n" not in str(raised.value)


def test_a_failing_summarizer_is_retried_then_dead_lettered(sqlite_url, caplog):
    """The workers' rules: `max_retries` retries with backoff, then given up; nothing half-written."""
    policy = POLICY.replace(
        '{ type = "sliding", max_events = 4 }', '{ type = "recursive", max_events_to_keep = 4 }'
    )
    caplog.set_level(logging.INFO, logger="sessionledger.infrastructure.background_compaction")
    with open_service(
        sqlite_url,
        compaction="background",
        policy=policy,
        openai_base_url="http://127.0.0.1:9/v1",  # nothing listens: every summary fails
        openai_api_key="test",
        summarizer_max_retries=0,
        summarizer_timeout=2,
        max_retries=1,
        retry_backoff=1,
    ) as service:
        session_id = service.create_session("user").id
        appended = append_turns(service, session_id, 6)
        deadline = time.monotonic() + 60
        while not any(r.message == "dead-lettered" for r in caplog.records) and time.monotonic() < deadline:
            time.sleep(0.1)
    failed = [r for r in caplog.records if r.message == "compaction failed"]
    (letter,) = [r for r in caplog.records if r.message == "dead-lettered"]
    assert len(failed) == 2, "the first attempt and one retry"
    assert letter.fields["session_ids"] == [session_id]
    assert "gave up after 1 retries" in letter.fields["reason"]
    assert "while the service closed" not in letter.fields["reason"]
    with open_service(sqlite_url) as service:
        assert compactions(service, session_id) == 0
        assert_intact(service, session_id, appended)


def test_the_readme_block_ends_with_a_compacted_window(tmp_path):
    """The README's "Compaction without a broker" block, run as test_readme runs every block: the
    service's close drained the compactor, so the window is a summary turn and the last 4 events."""
    blocks = fenced_blocks(README, "python")
    ((line, code),) = [block for block in blocks if 'compaction="background"' in block[1]]
    ran = run_block(line, code, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "6 messages in the window\n"
