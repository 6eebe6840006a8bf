"""Compaction without a broker: the workers' evaluate and compact, on a thread of the application.

`open_service(url, compaction="background", policy=...)` (and `open_async_service`) attach a
`BackgroundCompactor` to the service: every append stored tells it the session (after its
commit: `SessionService.watch_appends`), it waits `debounce` seconds so that a burst of appends
to a session is evaluated once, then runs, on its one thread, exactly what the workers' tasks run
(`compaction_runs.Compactions`: the same policies, the same lease and version checks) and retries a
failure as they do (`retry_delay`, `gives_up`). What the workers would dead-letter is given up
here too: logged as `dead-lettered` (a WARNING, with its reason, as the workers' dead letters
say it); the session is evaluated again by its next append. Closing the service drains the compactor
first: every session still waiting is evaluated (and compacted when due) at once, a retry that
fails again then is given up, and only then is the ledger closed; a compaction is one
transaction, so none is ever half-written.

Processes that each run one on the same database compact each session once: the lease keeps
their compactions apart, and the version check of the write-back settles any race.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from sessionledger.domain.ports import LeaseStore
from sessionledger.infrastructure.compaction_runs import (
    Compactions,
    Outcome,
    gives_up,
    is_outage,
    retry_delay,
)
from sessionledger.infrastructure.forks import forget_in_children
from sessionledger.infrastructure.policies import PolicyBook, policies_from_settings
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.tracing import Context, traced_context, within

log = logging.getLogger(__name__)

MODES = ("workers", "background")
"""`open_service`'s `compaction=`: left to the workers (the default), or in this process."""

DEBOUNCE = 0.05
"""Seconds a session waits after an append before it is evaluated, so that a burst is evaluated once."""


def compaction_settings(settings: Settings, compaction: str, policy: str | Path | None) -> Settings:
    """The settings `open_service` runs with, checked: `ValueError` (one line) for an unknown
    `compaction` mode. `policy` is the policy of this service: TOML text (anything with a `=` or a
    line break), or a path to a TOML file; `None` keeps the configured one (`SESSIONLEDGER_POLICY`,
    `SESSIONLEDGER_POLICY_FILE`)."""
    if compaction not in MODES:
        raise ValueError(f"compaction must be one of {', '.join(map(repr, MODES))}, not {compaction!r}")
    if policy is None:
        return settings
    if isinstance(policy, str) and ("=" in policy or "\n" in policy):
        return settings.model_copy(update={"policy": policy, "policy_file": None})
    if not isinstance(policy, str | Path):
        raise ValueError(f"policy must be TOML text, a path or None, not {type(policy).__name__}")
    return settings.model_copy(update={"policy": None, "policy_file": Path(policy)})


def background_policies(settings: Settings) -> PolicyBook:
    """The settings' policies, with the settings' summarizer: `ValueError` naming what is wrong."""
    from sessionledger.infrastructure.summarizers.factory import summarizer_from_settings

    return policies_from_settings(lambda: summarizer_from_settings(settings), settings)


def compact_in_background(
    service: SessionService, leases: LeaseStore, policies: PolicyBook
) -> BackgroundCompactor:
    """A compactor for the service's sessions, told of its appends and closed with it."""
    settings = service.settings
    compactor = BackgroundCompactor(Compactions(service, policies, leases, settings.lease), settings)
    service.watch_appends(compactor)
    return compactor


class BackgroundCompactor:
    """One thread evaluating and compacting the sessions it is told of; `close()` drains it.

    Thread-safe: `appended` is called by every appending thread, and only takes a lock long enough
    to note the session.
    """

    def __init__(self, compactions: Compactions, settings: Settings, *, debounce: float = DEBOUNCE) -> None:
        self._compactions = compactions
        self._settings = settings
        self._debounce = debounce
        self._closing = False
        self._stopped = False
        self._nothing_due()
        self._thread = self._started()
        forget_in_children(self, BackgroundCompactor._forget_parent)

    def _started(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="sessionledger-compactor", daemon=True)
        thread.start()
        return thread

    def _nothing_due(self) -> None:
        """No session due, none running, the lease owner this compactor in this process."""
        self._owner = f"background-{os.getpid()}-{id(self):x}"
        self._due: dict[str, float] = {}
        """session id -> when it is to be evaluated (monotonic seconds)"""
        self._traces: dict[str, Context] = {}
        """session id -> the trace of the append that woke it, which its compaction continues"""
        self._retries: dict[str, int] = {}
        self._changed = threading.Condition()
        self._running = False

    def _forget_parent(self) -> None:
        """In a forked child, where the thread did not follow: a thread of its own, under a lease
        owner of its own, for the appends made here (the parent compacts what it was told of)."""
        self._nothing_due()
        if not self._closing:
            self._thread = self._started()

    def appended(self, session_id: str) -> None:
        """An append to the session was stored: evaluate it after the debounce (once for a burst),
        in the trace of the burst's first append, if it is traced."""
        traced_by = traced_context()
        with self._changed:
            if session_id not in self._due and not self._stopped:
                self._due[session_id] = time.monotonic() + self._debounce
                if traced_by is not None:
                    self._traces[session_id] = traced_by
                self._changed.notify()

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until no session is waiting or being compacted, for a caller that wants to see the
        result (the demo); False on timeout (retries waiting for their backoff count as busy)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._due or self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.05))
        return True

    def close(self) -> None:
        """Evaluate (and compact when due) every session still waiting, at once, then stop; a
        failure now is given up. Closing twice is harmless."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while (session_id := self._next()) is not None:
            try:
                with self._changed:
                    context = self._traces.pop(session_id, None)
                within(context, lambda: self._evaluate(session_id))
            finally:
                with self._changed:
                    self._running = False
                    self._changed.notify_all()

    def _next(self) -> str | None:
        """The next session due, waited for; None once closing and nothing is left."""
        with self._changed:
            while True:
                if self._due:
                    session_id, due = min(self._due.items(), key=lambda item: item[1])
                    wait = due - time.monotonic()
                    if self._closing or wait <= 0:
                        del self._due[session_id]
                        self._running = True
                        return session_id
                    self._changed.wait(wait)
                elif self._closing:
                    self._stopped = True
                    return None
                else:
                    self._changed.wait()

    def _evaluate(self, session_id: str) -> None:
        """The workers' `evaluate` then `compact`, and after a compaction `evaluate` again (the
        appends made while the summarizer ran); a failure retried as theirs are."""
        compactions = self._compactions
        try:
            outcome = compactions.evaluate(session_id)
            if outcome is Outcome.COMPACT:
                outcome = compactions.compact(session_id, self._owner)
        except Exception as error:
            self._failed(session_id, error)
            return
        self._retries.pop(session_id, None)
        if outcome is Outcome.COMPACTED:
            self.appended(session_id)

    def _failed(self, session_id: str, error: Exception) -> None:
        retries = self._retries.get(session_id, 0)
        log.warning("compaction failed", extra={"fields": {"session_id": session_id, "error": repr(error)}})
        if self._closing or gives_up(self._settings, retries, error):
            self._retries.pop(session_id, None)
            closing = " while the service closed" if self._closing else ""
            reason = f"{type(error).__name__}: {error} (gave up after {retries} retries{closing})"
            letter = {"reason": reason, "task": "compact", "session_ids": [session_id]}
            log.warning("dead-lettered", extra={"fields": letter})
            return
        self._retries[session_id] = retries + 1
        delay = retry_delay(self._settings, retries, is_outage(error))
        with self._changed:
            self._due[session_id] = time.monotonic() + delay
