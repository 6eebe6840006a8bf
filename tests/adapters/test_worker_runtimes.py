"""Each Celery application has its own worker runtime, gone with the application."""

from __future__ import annotations

import gc
import uuid
import weakref

from celery import Celery
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import create_app
from sessionledger.workers.runtime import runtime_of


def application() -> Celery:
    return create_app(
        Settings(broker_url="memory://", queue_prefix=f"r{uuid.uuid4().hex[:8]}", database_url="memory://")
    )


def test_a_runtime_goes_with_its_application() -> None:
    """Once an application is collected nothing can find its runtime again. Runtimes found by the
    application's `id()` outlived it, and CPython gives a new object the address of one just
    collected: a later application built there was handed the old one's runtime (its settings,
    storage and policies), as a test suite building an application per test met (a task ran on
    another test's runtime)."""
    first = application()
    runtime = weakref.ref(runtime_of(first))
    assert runtime_of(first) is runtime()  # one runtime per application and process
    del first
    application()  # the current one now: Celery keeps its current application alive
    gc.collect()
    assert runtime() is None


def test_two_applications_have_two_runtimes() -> None:
    first, second = application(), application()
    assert runtime_of(first) is not runtime_of(second)
    assert runtime_of(second).settings.queue_prefix == second.sessionledger_settings.queue_prefix
