"""SessionMemory's (and AsyncSessionMemory's) find-or-create under a race: two first turns at once
of one conversation both succeed, on one session, with both messages stored (memory, SQLite and
PostgreSQL; on the async face, two coroutines at once on one event loop)."""

from __future__ import annotations

import threading
import uuid

from sessionledger.domain import UserMessage

from tests.integration import agent_faces

face, service = agent_faces.face, agent_faces.service  # each test on both faces


def test_two_first_turns_at_once_share_one_session(face, service):
    memory = face.SessionMemory(service)
    user = f"u-{uuid.uuid4().hex[:10]}"
    for _ in range(5):
        cid = f"c-{uuid.uuid4().hex[:10]}"
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def turn(
            text: str,
            cid: str = cid,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            barrier.wait()
            try:
                memory.before(cid, [UserMessage(text)], user_id=user)
            except BaseException as error:  # reported below, in the test's thread
                errors.append(error)

        threads = [threading.Thread(target=turn, args=(text,)) for text in ("first", "second")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert errors == []
        assert sorted(m.text for m in service.get_messages(cid)) == ["first", "second"]
        assert service.get_session(cid).user_id == user
