"""`LedgerSaver` beyond the conformance suite, on memory, SQLite and PostgreSQL: a compiled graph's
conversation is the session's messages (each stored once) and its checkpoints are on the chain;
users are isolated; forgetting keeps the ledger's record; both faces share one ledger."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import uuid
import weakref
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.serde.base import CipherProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, MessagesState, StateGraph
from sessionledger.domain import MessageType
from sessionledger.domain.codec import ensure_json
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import SessionService, open_async_service, open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.audit.timeline import timeline
from sessionledger.infrastructure.langgraph import LedgerSaver
from sessionledger.infrastructure.langgraph import saver as saver_module
from sessionledger.infrastructure.langgraph.checkpoints import MESSAGE, checkpoint_entry
from sessionledger.infrastructure.langgraph.saver import LATEST_READ
from sessionledger.infrastructure.ledger.driver import DriverStatement

from tests.conftest import SQL_BACKENDS, sql_url
from tests.integration.server_side import admin_sql


@pytest.fixture
def service(database_url: str) -> Iterator[SessionService]:
    with open_service(database_url) as svc:
        yield svc


@pytest.fixture
def saver(service: SessionService) -> Iterator[LedgerSaver]:
    with LedgerSaver(service=service) as saver:
        yield saver


def thread() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def config(thread_id: str, **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **configurable}}


def echo_graph(saver: LedgerSaver) -> Any:
    """Two nodes: a model that answers with the last question's length, then a reviewer."""

    def model(state: MessagesState) -> dict[str, Any]:
        question = state["messages"][-1].content
        return {"messages": [AIMessage(f"{question!s} has {len(str(question))} characters")]}

    def reviewer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("reviewed")]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("reviewer", reviewer)
    graph.add_edge(START, "model")
    graph.add_edge("model", "reviewer")
    return graph.compile(checkpointer=saver)


ECHOED = ["hello", "hello has 5 characters", "reviewed", "again", "again has 5 characters", "reviewed"]
"""The messages of `echo_graph` after "hello" and "again"."""


def test_a_graphs_conversation_is_the_sessions_messages(service: SessionService, saver: LedgerSaver) -> None:
    tid = thread()
    graph = echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hello")]}, config(tid))
    result = graph.invoke({"messages": [HumanMessage("again")]}, config(tid))
    assert [m.content for m in result["messages"]] == ECHOED
    events = service.get_events(tid)
    assert [(e.type, e.message.text) for e in events] == [
        (MessageType.USER, "hello"),
        (MessageType.ASSISTANT, "hello has 5 characters"),
        (MessageType.ASSISTANT, "reviewed"),
        (MessageType.USER, "again"),
        (MessageType.ASSISTANT, "again has 5 characters"),
        (MessageType.ASSISTANT, "reviewed"),
    ]  # each once, though every later checkpoint holds it again
    assert [e.id for e in events] == [m.id for m in result["messages"]]
    session = service.get_session(tid)
    assert session is not None and (session.user_id, session.app_name) == ("langgraph", "langgraph")
    records = service.records(tid)
    assert sum(r.kind is Kind.ENTRY for r in records) >= 8  # checkpoints and writes, on the chain
    assert verify(service, tid).ok
    assert any(entry.text.startswith("langgraph.checkpoint entry") for entry in timeline(service, tid))
    state = graph.get_state(config(tid))
    assert state.values["messages"][-1].content == "reviewed"
    assert len(list(graph.get_state_history(config(tid)))) == len(list(saver.list(config(tid))))


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_a_graphs_conversation_is_compacted_in_the_background(request: Any, backend: str) -> None:
    """The saver's appends reach the service's compactor, as every other append does; the graph
    keeps its whole state, since compaction changes only the session's window."""
    url = sql_url(request, backend)
    policy = 'apps.langgraph.trigger = { type = "turns", max_turns = 1 }\n'
    policy += 'apps.langgraph.strategy = { type = "sliding", max_events = 3 }\n'
    tid = thread()
    with open_service(url, compaction="background", policy=policy) as service:
        graph = echo_graph(LedgerSaver(service=service))
        graph.invoke({"messages": [HumanMessage("hello")]}, config(tid))
        graph.invoke({"messages": [HumanMessage("again")]}, config(tid))
    with open_service(url) as service:  # the first one drained its compactor as it closed
        assert [m.text for m in service.get_messages(tid)] == ECHOED[3:]
        assert [r.kind for r in service.records(tid)].count(Kind.COMPACTION) == 1
        assert verify(service, tid).ok
        graph = echo_graph(LedgerSaver(service=service))
        assert [m.content for m in graph.get_state(config(tid)).values["messages"]] == ECHOED


def test_each_message_is_written_once_and_each_checkpoint_reads_its_own(
    service: SessionService, saver: LedgerSaver
) -> None:
    tid = thread()
    graph = echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hello")]}, config(tid))
    graph.invoke({"messages": [HumanMessage("again")]}, config(tid))
    assert len(service.entries(tid, "langgraph.message")) == 6  # not once per checkpoint holding it
    first = graph.get_state(config(tid)).values["messages"][0]
    # add_messages replaces a message given again under its id: the new text is another entry
    graph.update_state(config(tid), {"messages": [HumanMessage("hello, edited", id=first.id)]})
    history = [state.values.get("messages", []) for state in graph.get_state_history(config(tid))]
    assert history[0][0].content == "hello, edited" and history[1][0].content == "hello"
    assert [m.content for m in history[0][1:]] == [m.content for m in history[1][1:]]
    assert len(service.entries(tid, "langgraph.message")) == 7
    with LedgerSaver(service=service) as fresh:  # a saver that knows nothing of the thread
        latest = fresh.get_tuple(config(tid))
        assert latest is not None
        assert [m.content for m in latest.checkpoint["channel_values"]["messages"]] == [
            m.content for m in history[0]
        ]
        assert [m.id for m in latest.checkpoint["channel_values"]["messages"]] == [m.id for m in history[0]]


def test_a_saver_that_did_not_write_a_threads_messages_learns_them_from_its_first_read(
    service: SessionService, saver: LedgerSaver
) -> None:
    """A process restarted, or a second one: its graph's run reads the thread first, and then
    writes only the new messages, and sends only their events."""
    tid = thread()
    echo_graph(saver).invoke({"messages": [HumanMessage("hello")]}, config(tid))
    sent: list[str] = []
    append_entries = service.append_entries

    def spied(session_id: str, entries: Any, *, events: Any = (), **kwargs: Any) -> Any:
        sent.extend(event.message.text for event in events)
        return append_entries(session_id, entries, events=events, **kwargs)

    with LedgerSaver(service=service) as restarted, pytest.MonkeyPatch.context() as patch:
        patch.setattr(service, "append_entries", spied)
        result = echo_graph(restarted).invoke({"messages": [HumanMessage("again")]}, config(tid))
    assert sent == ECHOED[3:]
    assert [m.content for m in result["messages"]] == ECHOED
    keys = [entry.key for entry in service.entries(tid, MESSAGE)]
    assert len(keys) == len(set(keys)) == len(ECHOED)
    assert [e.id for e in service.get_events(tid)] == [m.id for m in result["messages"]]


def test_a_saver_forgets_the_messages_of_the_thread_it_used_least_recently(
    service: SessionService, saver: LedgerSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond `KEPT_THREADS` threads, the one used least recently is forgotten, not every thread:
    a run under way keeps what it knows, and a forgotten thread learns its messages again from its
    next read, so no message is written twice."""
    monkeypatch.setattr(saver_module, "KEPT_THREADS", 2)
    graph = echo_graph(saver)
    first, second, third = thread(), thread(), thread()
    for tid in (first, second):
        graph.invoke({"messages": [HumanMessage("hello")]}, config(tid))
    latest = saver.get_tuple(config(first))  # first is now the more recently used
    assert latest is not None
    graph.invoke({"messages": [HumanMessage("hello")]}, config(third))  # forgets second
    again = generate_checkpoint(
        channel_values=latest.checkpoint["channel_values"],
        channel_versions=latest.checkpoint["channel_versions"],
    )
    saver.put(latest.config, again, generate_metadata(step=9), {})  # no read since: first is known
    for tid in (second, first):
        graph.invoke({"messages": [HumanMessage("again")]}, config(tid))
    for tid in (first, second, third):
        keys = [entry.key for entry in service.entries(tid, MESSAGE)]
        assert len(keys) == len(set(keys)), "a message was written again"


def test_a_saver_past_its_message_budget_forgets_the_threads_used_least_recently(
    service: SessionService, saver: LedgerSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond about `KEPT_MESSAGES` remembered messages, whatever the number of threads, the
    threads used least recently are forgotten: a server of many long threads held 438 bytes for
    every message of its last 4,096 threads. The thread in use is kept however long it is, and a
    forgotten thread learns its messages again from its next read: none is written twice."""
    monkeypatch.setattr(saver_module, "KEPT_MESSAGES", 12)
    graph = echo_graph(saver)
    tids = [thread() for _ in range(4)]
    for tid in tids:
        for question in ("hello", "again"):
            graph.invoke({"messages": [HumanMessage(question)]}, config(tid))
    remembered = {tid: len(known.stored) for tid, known in saver._messages.items()}
    assert list(remembered) == tids[-2:], remembered  # six messages each, counted as they are used
    for question in ("once", "more"):
        graph.invoke({"messages": [HumanMessage(question)]}, config(tids[-1]))
    assert list(saver._messages) == tids[-1:] and len(saver._messages[tids[-1]].stored) == 12
    for tid in tids:
        graph.invoke({"messages": [HumanMessage("back")]}, config(tid))
        texts = [m.content for m in graph.get_state(config(tid)).values["messages"]]
        assert texts[:6] == ECHOED and texts[-3:] == ["back", "back has 4 characters", "reviewed"]
        keys = [entry.key for entry in service.entries(tid, MESSAGE)]
        assert len(keys) == len(set(keys)) == len(texts), "a message was written again"


def test_a_saver_past_its_limit_forgets_one_owner_at_a_time(
    service: SessionService, saver: LedgerSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond `KEPT_THREADS` owners, the one remembered first is forgotten (and asked again on its
    thread's next put), not every owner: the other threads' puts ask the ledger nothing."""
    monkeypatch.setattr(saver_module, "KEPT_THREADS", 2)
    first, second, third = thread(), thread(), thread()
    latest = {tid: saver.put(config(tid), generate_checkpoint(), {}, {}) for tid in (first, second, third)}
    asked: list[str] = []
    get_session = service.get_session
    monkeypatch.setattr(service, "get_session", lambda tid, **kw: asked.append(tid) or get_session(tid, **kw))
    for tid in (second, third, first, first):
        latest[tid] = saver.put(latest[tid], generate_checkpoint(), {}, {})
    assert asked == [first]


class CountingSerializer(JsonPlusSerializer):
    """langgraph's serializer, counting the messages it serializes."""

    def __init__(self) -> None:
        super().__init__()
        self.messages = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.messages += isinstance(obj, BaseMessage)
        return super().dumps_typed(obj)


def test_a_run_serializes_only_its_new_messages(service: SessionService) -> None:
    """The messages a run reads come back to its puts as the same objects: keyed as read, not
    serialized again (a thread of n messages cost n serializations a run)."""
    serde = CountingSerializer()
    tid = thread()
    with LedgerSaver(service=service, serde=serde) as saver:
        graph = echo_graph(saver)
        graph.invoke({"messages": [HumanMessage("hello")]}, config(tid))
        serde.messages = 0
        graph.invoke({"messages": [HumanMessage("again")]}, config(tid))
    assert serde.messages == 3  # the question and the two answers


def test_a_saver_keeps_no_message_of_a_finished_run_alive(saver: LedgerSaver) -> None:
    """It remembers which messages it stored, not the messages: a server's saver kept every
    thread's conversation in memory (about 2.7 KB a message of a thousand characters)."""
    graph = echo_graph(saver)
    tid = thread()
    result = graph.invoke({"messages": [HumanMessage("hello " * 200)]}, config(tid))
    alive = [weakref.ref(message) for message in result["messages"]]
    del result
    gc.collect()
    assert [ref() for ref in alive] == [None] * len(alive)
    again = graph.invoke({"messages": [HumanMessage("again")]}, config(tid))  # and it still knows
    keys = [entry.key for entry in saver.service.entries(tid, MESSAGE)]
    assert len(keys) == len(set(keys)) == len(again["messages"])


class AesGcm(CipherProtocol):
    """AES-GCM (the `cryptography` package) for langgraph's `EncryptedSerializer`."""

    def __init__(self, key: bytes) -> None:
        self._aes = AESGCM(key)

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(12)
        return "aes-gcm", nonce + self._aes.encrypt(nonce, plaintext, None)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "aes-gcm"
        return self._aes.decrypt(ciphertext[:12], ciphertext[12:], None)


def test_under_an_encrypting_serializer_the_graphs_conversation_is_stored_only_encrypted(
    service: SessionService,
) -> None:
    """langgraph's `EncryptedSerializer`: its user asked for the graph's state encrypted, so the
    messages are not also readable events; each is still one entry, though every serialization
    of it gives other bytes, and the graph reads its state back."""
    serde = EncryptedSerializer(AesGcm(AESGCM.generate_key(bit_length=256)))
    tid = thread()
    with LedgerSaver(service=service, serde=serde) as saver:
        graph = echo_graph(saver)
        graph.invoke({"messages": [HumanMessage("hello")]}, config(tid))
        result = graph.invoke({"messages": [HumanMessage("again")]}, config(tid))
    assert [m.content for m in result["messages"]] == ECHOED
    assert service.get_events(tid) == []
    keys = [entry.key for entry in service.entries(tid, MESSAGE)]
    assert len(keys) == len(set(keys)) == len(ECHOED)
    stored = json.dumps([record.payload for record in service.records(tid)])
    assert not any(text in stored for text in ECHOED), "a message is stored readable"
    with LedgerSaver(service=service, serde=serde) as restarted:
        latest = restarted.get_tuple(config(tid))
        assert latest is not None
        assert latest.checkpoint["channel_values"]["messages"] == result["messages"]
        assert verify(service, tid).ok


@pytest.mark.parametrize("since", [0, 1, LATEST_READ - 2, LATEST_READ - 1, 3 * LATEST_READ])
def test_the_latest_checkpoint_comes_with_exactly_its_writes_in_one_read_while_they_are_few(
    service: SessionService, saver: LedgerSaver, monkeypatch: pytest.MonkeyPatch, since: int
) -> None:
    tid = thread()
    older = saver.put(config(tid), generate_checkpoint(), generate_metadata(), {})
    saver.put_writes(older, [("before", "the latest")], "older-task")
    latest = saver.put(older, generate_checkpoint(), generate_metadata(), {})
    for n in range(since):  # writes since the latest checkpoint, and one to the older after it
        saver.put_writes(latest, [("channel", n)], f"task-{n}")
    saver.put_writes(older, [("late", "to the older")], "late-task")
    reads: list[object] = []
    entries = service.entries
    monkeypatch.setattr(service, "entries", lambda *a, **k: reads.append(a) or entries(*a, **k))
    found = saver.get_tuple(config(tid))
    assert found is not None and found.config == latest
    assert sorted(found.pending_writes or []) == sorted((f"task-{n}", "channel", n) for n in range(since))
    # newest first: the late write, those since, then the checkpoint; past `LATEST_READ`, two more reads
    assert len(reads) == (1 if since + 2 <= LATEST_READ else 3)
    assert saver.get_tuple(config(tid, user_id="mallory")) is None


class Mood(StrEnum):
    CALM = "calm"


SCALARS = {"text": "a long answer, " * 200, "count": 3, "ratio": 0.25, "done": True, "nothing": None}
"""Channel values held as JSON in a checkpoint's entry (`checkpoints.py`)."""
TYPED = {"nul": "a\x00b", "inf": float("inf"), "mood": Mood.CALM, "items": [1, "two"], "big": 2**63}
"""Channel values only langgraph's serializer keeps as they are (a JSON text cannot hold a NUL for
PostgreSQL, an infinity, an enum's type or a 64-bit overflow; a list is no scalar)."""


class OwnSerializer(JsonPlusSerializer):
    """Another serializer (as an encrypting one is): it is given every channel value."""

    def __init__(self) -> None:
        super().__init__(allowed_msgpack_modules=[(__name__, "Mood")])


def test_scalar_channel_values_are_json_and_every_value_reads_back_exactly(service: SessionService) -> None:
    values = {**SCALARS, **TYPED}
    versions = {name: 1 for name in values}
    checkpoint = generate_checkpoint(channel_values=values, channel_versions=versions)
    tid, other = thread(), thread()
    serde = JsonPlusSerializer(allowed_msgpack_modules=[(__name__, "Mood")])
    with (
        LedgerSaver(service=service, serde=serde) as saver,
        LedgerSaver(service=service, serde=OwnSerializer()) as own,
    ):
        stored = saver.put(config(tid), checkpoint, generate_metadata(), versions)
        own.put(config(other), checkpoint, generate_metadata(), versions)
        (entry,) = service.entries(tid, "langgraph.checkpoint")
        assert entry.value["values"] == SCALARS
        (entry,) = service.entries(other, "langgraph.checkpoint")
        assert "values" not in entry.value
        for read in (stored, config(other)):  # langgraph's serializer reads the other's entries too
            found = saver.get_tuple(read)
            assert found is not None
            got = found.checkpoint["channel_values"]
            assert got == values and {n: type(v) for n, v in got.items()} == {
                n: type(v) for n, v in values.items()
            }


def test_a_checkpoint_entry_is_plain_json_unless_a_value_needs_a_look() -> None:
    """The saver vouches for the JSON it builds (`Entry.plain`: not checked again on append) only
    where that holds: no float to spell, no outside string with a NUL."""
    serde = JsonPlusSerializer()
    values = {name: v for name, v in SCALARS.items() if type(v) is not float}
    versions = {name: 1 for name in SCALARS}
    plain = checkpoint_entry(serde, "", generate_checkpoint(channel_values=values), {"run_id": "r"}, "p")
    assert plain.plain
    ensure_json(plain.value, "a plain entry")
    floats = generate_checkpoint(channel_values=SCALARS, channel_versions=versions)
    assert not checkpoint_entry(serde, "", floats, {}, "p").plain
    assert not checkpoint_entry(serde, "", generate_checkpoint(), {}, "p\x00").plain


def test_another_users_thread_is_absent_and_refuses_writes(saver: LedgerSaver) -> None:
    tid = thread()
    stored = saver.put(config(tid, user_id="alice"), generate_checkpoint(), generate_metadata(), {})
    assert saver.get_tuple(config(tid, user_id="alice")) is not None
    assert saver.get_tuple(config(tid, user_id="bob")) is None
    assert saver.get_tuple(config(tid)) is None  # the default user, "langgraph", is another one
    assert list(saver.list(config(tid, user_id="bob"))) == []
    with pytest.raises(ValueError, match="does not belong"):
        saver.put(config(tid, user_id="bob"), generate_checkpoint(), generate_metadata(), {})
    with pytest.raises(ValueError, match="does not belong"):
        saver.put_writes(
            {**stored, "configurable": {**stored["configurable"], "user_id": "bob"}}, [("c", 1)], "t"
        )
    with pytest.raises(ValueError, match="does not belong"):
        saver.delete_thread(tid)  # the saver's user is "langgraph"
    assert saver.get_tuple(config(tid, user_id="alice")) is not None


def test_a_savers_user_owns_the_threads_it_creates(service: SessionService) -> None:
    tid = thread()
    with LedgerSaver(service=service, user_id="carol") as saver:
        saver.put(config(tid), generate_checkpoint(), generate_metadata(), {})
        assert saver.get_tuple(config(tid)) is not None
    session = service.get_session(tid)
    assert session is not None and session.user_id == "carol"


def test_a_deleted_thread_is_forgotten_and_takes_checkpoints_again(
    service: SessionService, saver: LedgerSaver
) -> None:
    tid = thread()
    first = saver.put(config(tid), generate_checkpoint(), generate_metadata(step=0), {})
    saver.put_writes(first, [("ch", "v")], "task")
    saver.delete_thread(tid)
    assert saver.get_tuple(config(tid)) is None
    again = saver.put(config(tid), generate_checkpoint(), generate_metadata(step=5), {})
    found = saver.get_tuple(config(tid))
    assert found is not None and found.config == again and found.metadata["step"] == 5
    assert found.pending_writes == []
    kinds = [r.kind for r in service.records(tid)]
    assert kinds.count(Kind.ENTRY) == 3 and kinds.count(Kind.FORGOTTEN) == 2  # the ledger forgets nothing
    assert verify(service, tid).ok


def test_a_thread_whose_session_was_deleted_reads_as_absent(
    service: SessionService, saver: LedgerSaver
) -> None:
    tid = thread()
    saver.put(config(tid), generate_checkpoint(), generate_metadata(), {})
    service.delete_session(tid)
    assert saver.get_tuple(config(tid)) is None
    with pytest.raises(ValueError, match="deleted"):
        saver.put(config(tid), generate_checkpoint(), generate_metadata(), {})


def test_both_faces_share_one_ledger(database_url: str) -> None:
    tid = thread()

    async def run() -> None:
        async with LedgerSaver(database_url) as saver:
            stored = saver.put(config(tid), generate_checkpoint(), generate_metadata(step=1), {})
            found = await saver.aget_tuple(config(tid))
            assert found is not None and found.config == stored
            await saver.aput_writes(stored, [("ch", "v")], "task")
            again = saver.get_tuple(stored)
            assert again is not None and again.pending_writes == [("task", "ch", "v")]
            assert [t.config async for t in saver.alist(config(tid))] == [stored]

    asyncio.run(run())


def test_an_async_service_is_left_open(database_url: str) -> None:
    tid = thread()

    async def run() -> None:
        async with open_async_service(database_url) as service:
            async with LedgerSaver(service=service) as saver:
                await saver.aput(config(tid), generate_checkpoint(), generate_metadata(), {})
            assert await service.get_session(tid) is not None  # still open after the saver closed

    asyncio.run(run())


def test_a_given_service_and_a_url_are_not_both_taken(service: SessionService) -> None:
    with pytest.raises(ValueError):
        LedgerSaver("memory://", service=service)
    with pytest.raises(ValueError):
        LedgerSaver(service=service, user_id="")


@pytest.mark.parametrize("backend", ["postgres", "mariadb"])
def test_an_async_put_to_a_known_thread_is_sent_from_the_event_loop(
    request: pytest.FixtureRequest, backend: str, pool_hops: list[object]
) -> None:
    """Once a thread is known to be the user's, `aput` and `aput_writes` append from the loop, with
    no hop to a thread; a put whose cached head another saver moved is stored by the synchronous
    path; another user's thread is still neither written nor read, and a deleted one is refused;
    a graph's messages are stored once and the chain verifies."""
    url = sql_url(request, backend)
    tid, deleted = thread(), thread()

    async def run() -> None:
        async with LedgerSaver(url) as saver:
            assert len(pool_hops) == 1  # the ledger opened on the pool
            pool_hops.clear()
            created = saver.put(config(tid), generate_checkpoint(), generate_metadata(step=1), {})
            first = await saver.aput(created, generate_checkpoint(), generate_metadata(step=2), {})
            await saver.aput_writes(first, [("ch", "v")], "task")
            assert pool_hops == []
            with LedgerSaver(url) as other:  # another process's saver: the cached head is stale
                moved = other.put(first, generate_checkpoint(), generate_metadata(step=3), {})
            last = await saver.aput(moved, generate_checkpoint(), generate_metadata(step=4), {})
            assert len(pool_hops) == 1  # the head had moved: stored by the synchronous path
            found = await saver.aget_tuple(config(tid))
            assert found is not None and found.config == last and found.metadata["step"] == 4
            assert found.pending_writes == []  # the writes were to an earlier checkpoint
            bob = {**last, "configurable": {**last["configurable"], "user_id": "bob"}}
            with pytest.raises(ValueError, match="does not belong"):
                await saver.aput(bob, generate_checkpoint(), generate_metadata(step=5), {})
            with pytest.raises(ValueError, match="does not belong"):
                await saver.aput_writes(bob, [("ch", "bob's")], "task")
            assert await saver.aget_tuple(config(tid, user_id="bob")) is None
            assert (await saver.aget_tuple(config(tid))).config == last  # type: ignore[union-attr]
            await saver.aput(config(deleted), generate_checkpoint(), generate_metadata(), {})
            saver.service.delete_session(deleted)
            with pytest.raises(ValueError, match="deleted"):
                await saver.aput(config(deleted), generate_checkpoint(), generate_metadata(), {})
            graph = echo_graph(saver)
            await graph.ainvoke({"messages": [HumanMessage("hello")]}, config(tid))
            pool_hops.clear()
            result = await graph.ainvoke({"messages": [HumanMessage("again")]}, config(tid))
            assert [m.content for m in result["messages"]] == ECHOED
            # only the graph's read of its thread: its concurrent writes waited for each other, so
            # none found the head moved (and took the synchronous path)
            assert len(pool_hops) == 1
            assert [e.message.text for e in saver.service.get_events(tid)] == [
                m.content for m in result["messages"]
            ]
            assert verify(saver.service, tid).ok

    asyncio.run(run())


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "mariadb"])
def test_a_saver_opened_per_request_compiles_nothing_and_keeps_to_one_connection(
    request: pytest.FixtureRequest, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph's documentation opens its checkpointer in a `with` block per request. A saver so
    opened compiled the ledger's statements again (24 ms of a 70 ms request on PostgreSQL), and its
    first put opened a second connection to the server, to read the thread's head (4-5 ms)."""
    url = sql_url(request, backend)
    tid = thread()

    def request_on(saver: LedgerSaver) -> None:
        latest = saver.get_tuple(config(tid))
        saver.put(config(tid) if latest is None else latest.config, generate_checkpoint(), {}, {})
        assert saver.get_tuple(config(tid)) is not None

    with LedgerSaver(url, text_index="off") as first:
        request_on(first)
    made: list[object] = []
    compile_statement = DriverStatement.__init__

    def counted(statement: DriverStatement, *args: Any, **kwargs: Any) -> None:
        made.append(args[0])
        compile_statement(statement, *args, **kwargs)

    monkeypatch.setattr(DriverStatement, "__init__", counted)
    with LedgerSaver(url, text_index="off") as per_request:
        request_on(per_request)
        if backend == "postgres":
            others = "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            assert admin_sql(url, f"SELECT count(*) FROM pg_stat_activity {others}") == [(1,)]
        assert len(list(per_request.list(config(tid)))) == 2
    assert made == []


def test_a_saver_opens_its_ledger_at_with_and_never_on_the_event_loop(
    request: pytest.FixtureRequest, lazy_opens: list[int]
) -> None:
    """`LedgerSaver(url)` connects to nothing yet; `with` opens the ledger, so a database that
    cannot be used fails there, and `async with` opens it on the saver's pool: an async handler
    that opened a saver per request had its event loop blocked while the saver connected and
    checked the schema (12 ms each time on PostgreSQL)."""
    url = sql_url(request, "postgres")
    LedgerSaver(url).close()
    assert lazy_opens == []

    async def handler() -> int:
        async with LedgerSaver(url) as saver:
            assert len(lazy_opens) == 1
            tid = thread()
            stored = await saver.aput(config(tid), generate_checkpoint(), {}, {})
            assert await saver.aget_tuple(stored) is not None
        return threading.get_ident()

    loop_thread = asyncio.run(handler())
    assert len(lazy_opens) == 1 and lazy_opens[0] != loop_thread
    missing = url.rsplit("/", 1)[0] + f"/sl_missing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(sa.exc.OperationalError), LedgerSaver(missing):
        pass
