"""What agent memory adds, on PostgreSQL.

- a turn through `SessionMemory` (`before`, a fake model call that answers at once, `after`) on a
  1,000-event session, against the raw reads and writes such a turn needs, measured in the same run
  on a twin session: one window read (`get_events`, active) and two appends (`append_event`);
- `RecallTools.conversation_search` on a 100,000-event session against the same search on a
  1,000-event one: a keyword that is common (found on the first page at once), one of middling
  frequency, and a blank query (page 0 of everything); a keyword no event holds is reported too,
  without a target: with no text index, finding nothing means reading everything.
Sessions hold real ShareGPT messages, loaded through the batch ingest path. Cases alternate round
by round; figures are medians.
"""

from __future__ import annotations

import psycopg
from sessionledger.domain import AssistantMessage, EventFilter, Message, SessionEvent, UserMessage
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.agents import RecallTools, SessionMemory

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating, interleaved, timed

WINDOW_EVENTS = 1_000
TURNS_PER_ROUND = 20
TURN_ROUNDS = 7
SMALL, LARGE = 1_000, 100_000
SEARCH_ROUNDS = 7
TURN_TARGET = 1.3
SEARCH_TARGET = 1.5
QUERIES = {"common keyword 'the'": "the", "middling keyword 'python'": "python", "blank query": ""}
ABSENT = "zqxjkv-nowhere"
"""A keyword no event holds: the search reads the whole history (reported, no target)."""


def run() -> list[Row]:
    with fresh_postgres() as url, open_service(url) as service:
        rows = _turns(service, url)
        rows += _searches(service, url)
    return rows


def _analyzed(url: str) -> None:
    """Fresh planner statistics after a bulk load, as autovacuum would soon gather them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def _turns(service: SessionService, url: str) -> list[Row]:
    memory = SessionMemory(service)
    raw_session = payloads.session_with(service, WINDOW_EVENTS)
    memory_session = payloads.session_with(service, WINDOW_EVENTS)
    _analyzed(url)
    owner = service.get_session(memory_session).user_id  # type: ignore[union-attr]  # just created

    def raw_turns() -> float:
        return sum(timed(lambda: _raw_turn(service, raw_session)) for _ in range(TURNS_PER_ROUND))

    def memory_turns() -> float:
        return sum(timed(lambda: _memory_turn(memory, memory_session, owner)) for _ in range(TURNS_PER_ROUND))

    medians = alternating(TURN_ROUNDS, {"raw": raw_turns, "memory": memory_turns})
    raw, added = medians["raw"] / TURNS_PER_ROUND, medians["memory"] / TURNS_PER_ROUND
    ratio = added / raw
    return [
        Row(
            f"raw turn: window read + 2 appends, {WINDOW_EVENTS:,}-event session",
            report.duration(raw),
        ),
        Row(
            "SessionMemory.before + after around an instant model call",
            report.duration(added),
            f"raw turn {report.duration(raw)}",
            ratio,
            f"<= {TURN_TARGET}x",
            ratio <= TURN_TARGET,
        ),
    ]


def _raw_turn(service: SessionService, session_id: str) -> None:
    window = service.get_events(session_id, EventFilter.active())
    question = UserMessage(f"question after {len(window)} events")
    service.append_event(SessionEvent(session_id=session_id, message=question))
    service.append_event(SessionEvent(session_id=session_id, message=_model([question])))


def _memory_turn(memory: SessionMemory, session_id: str, user_id: str) -> None:
    prompt = memory.before(session_id, [UserMessage("question")], user_id=user_id)
    memory.after(session_id, [_model(prompt)], user_id=user_id)


def _model(prompt: list[Message]) -> Message:
    """A model that answers at once."""
    return AssistantMessage(f"an answer to {len(prompt)} messages")


def _searches(service: SessionService, url: str) -> list[Row]:
    tools = RecallTools(service)
    small = payloads.session_with(service, SMALL)
    large = payloads.session_with(service, LARGE)
    _analyzed(url)
    rows: list[Row] = []
    for label, query in [*QUERIES.items(), ("absent keyword", ABSENT)]:
        medians = interleaved(
            SEARCH_ROUNDS,
            {
                "small": lambda q=query: tools.conversation_search(small, q),
                "large": lambda q=query: tools.conversation_search(large, q),
            },
        )
        ratio = medians["large"] / medians["small"]
        targeted = query != ABSENT
        rows.append(
            Row(
                f"conversation_search, {label}, {LARGE:,} vs {SMALL:,} events",
                report.duration(medians["large"]),
                f"{SMALL:,} events {report.duration(medians['small'])}",
                ratio,
                f"<= {SEARCH_TARGET}x" if targeted else "-",
                ratio <= SEARCH_TARGET if targeted else None,
            )
        )
    return rows


if __name__ == "__main__":
    report.main(run)
