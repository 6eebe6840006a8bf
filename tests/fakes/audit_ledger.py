"""A small ledger for the audit page's tests: two users' sessions with every kind of record.

Alice's main session has messages (one quoting a database URL with its password), a compaction
that archives the start behind a summary, later messages, and a rewind (of a message that is
markup); her second session was deleted (only an admin sees it). Bob has one session whose text
no one else may see.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessionledger.domain import AssistantMessage, SessionEvent, UserMessage
from sessionledger.domain.compaction import RecursiveSummarizationStrategy
from sessionledger.infrastructure import SessionService

from tests.fakes.compaction import Always

SECRET_URL = "postgresql://auditor:hunter2-secret@db.example/ledger"
BOB_TEXT = "bob's private plan: the harbour at dawn"
MARKUP = "never mind <script>document.title='owned'</script>"
"""A message that is markup: a page shows it as text, never runs it."""
SUMMARY = "Alice asked about trains; the assistant listed the morning departures."


@dataclass(frozen=True)
class AuditLedger:
    alice: str
    alice_deleted: str
    bob: str
    reply: str
    """An assistant reply of Alice's written after the compaction (its model view has the summary)."""


class _FixedSummary:
    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return SUMMARY


def fill(service: SessionService) -> AuditLedger:
    alice = service.create_session("alice", app_name="trains").id
    for i in range(4):
        service.append_message(alice, UserMessage(f"when is train {i}?"))
        service.append_message(alice, AssistantMessage(f"train {i} leaves at 0{i}:15"))
    service.append_message(alice, UserMessage(f"my ledger is at {SECRET_URL}"))
    strategy = RecursiveSummarizationStrategy(_FixedSummary(), max_events_to_keep=2, overlap_size=1)
    assert service.compact(alice, Always(), strategy).archived
    service.append_message(alice, UserMessage("and the last train?"))
    reply = service.append_message(alice, AssistantMessage("the last train leaves at 23:40")).id
    service.append_event(
        SessionEvent(session_id=alice, message=UserMessage(MARKUP), invocation_id="inv-undo")
    )
    service.rewind(alice, "inv-undo")
    gone = service.create_session("alice", app_name="trains").id
    service.append_message(gone, UserMessage("forget me"))
    service.delete_session(gone)
    bob = service.create_session("bob", app_name="boats").id
    service.append_message(bob, UserMessage(BOB_TEXT))
    return AuditLedger(alice, gone, bob, reply)
