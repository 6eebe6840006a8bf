"""A compaction that archives the window's newest events leaves them archived through the next one:
the window's base never moves back (the ledger's window read, memory and SQL)."""

from __future__ import annotations

import uuid

from sessionledger.domain import UserMessage
from sessionledger.domain.compaction import CompactionRequest, CompactionResult
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit.verify import verify


class Always:
    def should_compact(self, request: CompactionRequest) -> bool:
        return True


class ArchiveNewest:
    def compact(self, request: CompactionRequest) -> CompactionResult:
        return CompactionResult(request.events[:-1], request.events[-1:])


def test_archiving_the_newest_event_twice_never_brings_the_first_one_back(database_url: str) -> None:
    with open_service(database_url) as service:
        session_id = service.create_session(f"u-{uuid.uuid4().hex[:8]}").id
        for text in ("a", "b", "c"):
            service.append_message(session_id, UserMessage(text))
        service.compact(session_id, Always(), ArchiveNewest())
        assert [m.text for m in service.get_messages(session_id)] == ["a", "b"]
        service.compact(session_id, Always(), ArchiveNewest())
        assert [m.text for m in service.get_messages(session_id)] == ["a"]
        service.append_message(session_id, UserMessage("d"))
        assert [m.text for m in service.get_messages(session_id)] == ["a", "d"]
        assert [e.message.text for e in service.replay(session_id).window] == ["a", "d"]
        assert verify(service, session_id).ok
