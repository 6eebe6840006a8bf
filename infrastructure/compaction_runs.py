"""Evaluating and compacting one session, and when a failed attempt is tried again: the one copy
of these rules, run by the workers' Celery tasks (`workers/tasks.py`) and by the in-process
compactor (`background_compaction.py`).

- `Compactions.evaluate(session_id)`: the app's trigger, decided from the window's running stats
  (token counts filled in one batch when the threshold is within reach).
- `Compactions.compact(session_id, owner)`: claim the session's lease, run `SessionService.compact`
  (the LLM call runs with no transaction or lock held; the write-back is version-checked, so of
  two processes racing for a session one writes and the other re-reads), release.
- `retry_delay` and `gives_up`: a failure is tried again after an exponential, jittered backoff, up
  to `max_retries` times; an unreachable database is waited for `database_retry_window` seconds
  whatever the count. Then the work is given up (dead-lettered).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from enum import StrEnum

from sessionledger.domain.append_outcomes import Tally
from sessionledger.domain.compaction import CompactionRequest
from sessionledger.domain.errors import SessionNotFound
from sessionledger.domain.filters import EventFilter
from sessionledger.domain.ports import LeaseStore
from sessionledger.infrastructure.failures import database_unavailable
from sessionledger.infrastructure.policies import PolicyBook
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.tracing import EVALUATE, Span, traced

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    """What evaluating or compacting did with its session; a `StrEnum`, so logs and task results
    read as plain words."""

    COMPACT = "compact"
    """evaluate: the app's trigger fired, the session is to be compacted."""
    BELOW_THRESHOLD = "below threshold"
    """evaluate: the app's trigger did not fire."""
    COMPACTED = "compacted"
    """compact: a compaction was written to the session's window."""
    NOTHING_TO_COMPACT = "nothing to compact"
    """compact: the strategy archived nothing."""
    BUSY = "busy"
    """compact: another compaction holds the session's lease."""
    DISABLED = "disabled"
    """The session's app has no compaction policy."""
    GONE = "gone"
    """The session was deleted, or never existed."""


@dataclass(frozen=True)
class Compactions:
    """What evaluating and compacting a session needs: the service, the apps' policies, the
    leases that keep two compactions of a session apart, and the counters a written compaction
    is added to (`tally`, in its transaction)."""

    service: SessionService
    policies: PolicyBook
    leases: LeaseStore
    lease_seconds: int
    tally: Tally | None = None

    def evaluate(self, session_id: str) -> Outcome:
        """`Outcome.COMPACT` when the app's trigger fires on the window; otherwise why not (in a
        `sessionledger.evaluate` span that says which)."""
        return traced(EVALUATE, lambda span: self._evaluate(session_id, span))

    def _evaluate(self, session_id: str, span: Span) -> Outcome:
        outcome = self._decide(session_id)
        if span.is_recording():
            span.set_attributes(
                {"sessionledger.session_id": session_id, "sessionledger.outcome": outcome.value}
            )
        return outcome

    def _decide(self, session_id: str) -> Outcome:
        service = self.service
        session = service.get_session(session_id)
        if session is None:
            return Outcome.GONE
        policy = self.policies.for_app(session.app_name)
        if policy is None:
            return Outcome.DISABLED
        stats = service.window_stats(session_id)
        if stats is None:
            return Outcome.GONE
        threshold = policy.token_threshold
        if threshold is not None and stats.uncounted and stats.tokens < threshold <= stats.bytes:
            service.fill_token_counts(session_id)
            stats = service.window_stats(session_id) or stats
        request = CompactionRequest.of(
            session,
            lambda: service.get_events(session_id, EventFilter.active()),
            stats,
            counter=service.token_counter,
        )
        return Outcome.COMPACT if policy.trigger.should_compact(request) else Outcome.BELOW_THRESHOLD

    def compact(self, session_id: str, owner: str) -> Outcome:
        """Compact the session under its lease, claimed as `owner`; `BUSY` when another holds it."""
        leases = self.leases
        if not leases.claim(session_id, owner, self.lease_seconds):
            if leases.holder(session_id) is None:
                return Outcome.GONE
            log.info("compaction already running elsewhere", extra={"fields": {"session_id": session_id}})
            return Outcome.BUSY
        try:
            return self._run(session_id)
        finally:
            leases.release(session_id, owner)

    def _run(self, session_id: str) -> Outcome:
        service = self.service
        session = service.get_session(session_id)
        policy = self.policies.for_app(session.app_name) if session else None
        if session is None or policy is None:
            return Outcome.GONE if session is None else Outcome.DISABLED
        if policy.token_threshold is not None:
            service.fill_token_counts(session_id)
        started = time.monotonic()
        try:
            result = service.compact(session_id, policy.trigger, policy.strategy, tally=self.tally)
        except SessionNotFound:
            return Outcome.GONE
        if not result.archived:
            return Outcome.NOTHING_TO_COMPACT
        log.info(
            "compacted",
            extra={
                "fields": {
                    "session_id": session_id,
                    "app_name": session.app_name,
                    "archived": result.events_removed,
                    "window": len(result.compacted),
                    "tokens_saved": result.tokens_saved,
                    "seconds": round(time.monotonic() - started, 3),
                }
            },
        )
        return Outcome.COMPACTED


def backoff(settings: Settings, retries: int) -> float:
    """The longest wait before the retry that follows `retries` retries: doubling from
    `retry_backoff`, capped at `retry_backoff_max`."""
    return float(min(settings.retry_backoff * 2**retries, settings.retry_backoff_max))


def retry_delay(settings: Settings, retries: int, outage: bool) -> float:
    """Full jitter (anything up to the backoff) for the work's own failures; at least half the
    backoff while the database is unreachable, so that the retries surely span the window."""
    longest = backoff(settings, retries)
    return random.uniform(longest / 2 if outage else 0.0, longest)


def waited_at_least(settings: Settings, retries: int) -> float:
    """How long `retries` retries of an unreachable database have surely waited, in seconds."""
    return sum(backoff(settings, done) / 2 for done in range(retries))


def is_outage(error: BaseException) -> bool:
    """Whether `error` says the database cannot be reached now (not the work's fault)."""
    return isinstance(error, database_unavailable())


def gives_up(settings: Settings, retries: int, error: BaseException) -> bool:
    """Whether work that failed with `error` after `retries` retries is dead-lettered now: past
    `max_retries`, and, for an unreachable database, only once the retries have surely waited
    `database_retry_window` seconds (a failover)."""
    outlasted = not is_outage(error) or waited_at_least(settings, retries) >= settings.database_retry_window
    return retries >= settings.max_retries and outlasted
