"""Real payloads: ShareGPT messages in file order (`infrastructure.sharegpt`), and sessions of them."""

from __future__ import annotations

from functools import cache
from itertools import islice

from sessionledger.domain import Message, SessionEvent
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.sharegpt import conversations

from bench.timing import timed

LOAD_BATCH = 2_000
"""Events per transaction when a benchmark loads a session through the batch ingest path."""


@cache
def messages(count: int) -> tuple[Message, ...]:
    """The first `count` messages of the packaged conversations, user and assistant alternating."""
    found = (message for conversation in conversations() for message in conversation.messages)
    return tuple(islice(found, count))


def cycled(count: int, pool: int = 5_000) -> list[Message]:
    """`count` messages taken round-robin from the first `pool` (large sessions stay realistic)."""
    source = messages(min(count, pool))
    return [source[i % len(source)] for i in range(count)]


def session_with(service: SessionService, events: int, loading: list[float] | None = None) -> str:
    """A new session holding `events` ShareGPT messages, stored through the batch ingest path
    (`SessionService.ingest`); the seconds each batch took are appended to `loading`."""
    session_id = service.create_session("bench", app_name="bench").id
    found = cycled(events)
    for start in range(0, events, LOAD_BATCH):
        batch = [SessionEvent(session_id=session_id, message=m) for m in found[start : start + LOAD_BATCH]]
        seconds = timed(lambda batch=batch: service.ingest(batch))
        if loading is not None:
            loading.append(seconds)
    return session_id
