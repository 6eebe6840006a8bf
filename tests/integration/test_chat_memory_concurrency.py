"""Concurrent `add`s to one conversation of a `MessageWindowChatMemory` over the ledger: the window
may lose a message to a concurrent add, but the ledger holds every added message exactly once and
no add fails on a conflict (memory, SQLite and PostgreSQL, real threads; on the async face, their
adds are coroutines running at once on one event loop)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest
from sessionledger.domain import UserMessage

from tests.conftest import SQL_BACKENDS, backend_url
from tests.integration import agent_faces

face = agent_faces.face  # each test on both faces

THREADS = 8
ADDS = 25


@pytest.mark.parametrize("backend", ["memory", *SQL_BACKENDS])
def test_concurrent_adds_store_each_message_in_the_ledger_exactly_once(face, request, backend):
    url = backend_url(request, backend, shared=True)
    conversation = f"conv-{uuid.uuid4().hex[:10]}"
    failures: list[BaseException] = []
    start = threading.Barrier(THREADS)
    with face.open_service(url, pool_size=THREADS) as service:
        memory = face.MessageWindowChatMemory(
            face.LedgerChatMemoryRepository(service, user_id="u"), max_messages=20
        )

        def adder(thread: int) -> None:
            start.wait()
            for k in range(ADDS):
                try:
                    memory.add(conversation, [UserMessage(f"t{thread}-{k}")])
                except BaseException as error:
                    failures.append(error)

        threads = [threading.Thread(target=adder, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stored = Counter(event.message.text for event in service.get_events(conversation))
        window = [m.text for m in memory.get(conversation)]
    assert failures == []
    added = {f"t{t}-{k}" for t in range(THREADS) for k in range(ADDS)}
    assert set(stored) == added
    assert [text for text, times in stored.items() if times > 1] == []
    assert set(window) <= added and len(window) == len(set(window))
    assert len(window) <= 20  # the bound holds as the adds interleave


@pytest.mark.parametrize("backend", ["memory", *SQL_BACKENDS])
def test_an_add_that_lands_while_another_computes_its_window_keeps_the_bound(request, backend):
    """Exactly between one add's read of the window and its write, another add writes: the first
    is computed again from the window it then finds, so the conversation keeps `max_messages`."""
    from sessionledger.domain import AssistantMessage
    from sessionledger.infrastructure import open_service
    from sessionledger.infrastructure.agents import LedgerChatMemoryRepository, MessageWindowChatMemory

    conversation = f"conv-{uuid.uuid4().hex[:10]}"
    with open_service(backend_url(request, backend, shared=True)) as service:
        memory = MessageWindowChatMemory(LedgerChatMemoryRepository(service, user_id="u"), max_messages=4)
        memory.add(conversation, [UserMessage("u0"), AssistantMessage("a0")])
        compact, raced = service.compact, []

        def racing(*args, **kwargs):
            result = compact(*args, **kwargs)
            if not raced:
                raced.append(True)
                memory.add(conversation, [UserMessage("u2"), AssistantMessage("a2")])
            return result

        service.compact = racing  # type: ignore[method-assign]
        memory.add(conversation, [UserMessage("u1"), AssistantMessage("a1")])
        assert [m.text for m in memory.get(conversation)] == ["u2", "a2", "u1", "a1"]
        assert sorted(e.message.text for e in service.get_events(conversation)) == sorted(
            ["u0", "a0", "u1", "a1", "u2", "a2"]
        )
