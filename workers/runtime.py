"""What a worker process needs to run tasks, built lazily, once per process.

Celery's prefork pool forks its children after the application is imported, and database
connections must not cross a fork, so nothing here is built before the first task of a process.
"""

from __future__ import annotations

import os
import threading
import weakref
from functools import cached_property
from typing import Any

from celery import Celery
from sessionledger.domain.tokens import TokenCounter
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.bootstrap import Storage, open_storage
from sessionledger.infrastructure.compaction_runs import Compactions
from sessionledger.infrastructure.policies import PolicyBook, policies_from_settings
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.summarizers.factory import summarizer_from_settings
from sessionledger.workers.app import indexes_text, settings_of
from sessionledger.workers.metrics import COMPACTION_TALLY, Metrics


class WorkerRuntime:
    """The storage (service, leases, counters, redelivery counts) and policies of one worker process."""

    def __init__(
        self,
        settings: Settings,
        storage: Storage | None = None,
        policies: PolicyBook | None = None,
        *,
        index_text: bool = False,
    ) -> None:
        """`index_text`: the storage this runtime opens keeps the keyword index up (`open_storage`)."""
        self.settings = settings
        self._index_text = index_text
        self._given_storage = storage
        self._given_policies = policies

    @cached_property
    def storage(self) -> Storage:
        return self._given_storage or open_storage(self.settings, index_text=self._index_text)

    @property
    def service(self) -> SessionService:
        return self.storage.service

    @cached_property
    def policies(self) -> PolicyBook:
        if self._given_policies is not None:
            return self._given_policies
        return policies_from_settings(lambda: summarizer_from_settings(self.settings), self.settings)

    @cached_property
    def compactions(self) -> Compactions:
        """Evaluating and compacting sessions, a written compaction counted (`COMPACTION_TALLY`)."""
        return Compactions(
            self.service, self.policies, self.storage.leases, self.settings.lease, COMPACTION_TALLY
        )

    @cached_property
    def metrics(self) -> Metrics:
        """Counters whose store opens with the first count: a worker's main process counts dead
        letters, and must not open the database before its pool's processes are forked."""
        return Metrics(lambda: self.storage.counters)

    @cached_property
    def token_counter(self) -> TokenCounter:
        return self.service.token_counter

    def close(self) -> None:
        if "metrics" in self.__dict__:
            self.metrics.flush()
        if "storage" in self.__dict__ and self._given_storage is None:
            self.storage.close()


_runtimes: weakref.WeakKeyDictionary[Celery, dict[int, WorkerRuntime]] = weakref.WeakKeyDictionary()
"""Each application's runtimes, by process id. Keyed by the application itself, held weakly: keyed
by `id()`, an application built after another was collected could be handed the other's runtime
(its settings, storage and policies), as a test suite that builds many applications found."""
_lock = threading.Lock()


def runtime_of(celery: Celery) -> WorkerRuntime:
    """The runtime of this process for that application (a fresh one after a fork)."""
    with _lock:
        mine = _runtimes.setdefault(celery, {})
        runtime = mine.get(os.getpid())
        if runtime is None:
            runtime = mine[os.getpid()] = WorkerRuntime(settings_of(celery), index_text=indexes_text(celery))
        return runtime


def install_runtime(celery: Celery, runtime: WorkerRuntime) -> None:
    """Use a runtime built elsewhere (the embedded pipeline shares its service)."""
    with _lock:
        _runtimes.setdefault(celery, {})[os.getpid()] = runtime


def close_runtimes(**_: Any) -> None:
    """Flush counters and close connections of this process (at worker process shutdown)."""
    with _lock:
        runtimes = [found for mine in _runtimes.values() if (found := mine.pop(os.getpid(), None))]
    for runtime in runtimes:
        runtime.close()
