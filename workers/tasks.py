"""The tasks: ingest a batch, evaluate a session's policy, compact a session, sweep expired sessions.

- `ingest(lines)`: each line is one event (`infrastructure.wire.encode_event`, read back by
  `decode_event`). The batch is stored in ledger transactions of `ingest_chunk` events,
  idempotently (event id), in order. Poison events (malformed JSON, an invalid event, an unknown
  session, over the payload limit) go to the dead-letter queue with their reason; the rest of the
  batch is stored. The message is acked only after that (acks_late). A database outage keeps the
  message, also one met when the worker first opens its database: it is retried in place (for
  `ingest_patience` seconds), then requeued: at the head of its partition on RabbitMQ, so nothing
  is reordered; Redis puts a requeued message at the back. A batch replayed from the dead-letter
  queue loses the events that would land after later events of their session (`replay_refusal`).
  A bound publisher's events for sessions of another user (or app) are dead-lettered too.
- `evaluate(session_id)`: the app's trigger (`infrastructure/compaction_runs.py`, whose rules the
  in-process compactor runs too); fires -> `compact`. It and `compact` return an `Outcome`.
- `compact(session_id)`: the session compacted under its lease (`Compactions.compact`); a
  compaction written -> `evaluate` again (appends made meanwhile).
- `sweep()`: delete expired sessions.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, NoReturn, TypeVar

from celery import Task, shared_task, signals
from celery.exceptions import Ignore, Reject
from celery.worker import state as worker_state
from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.errors import ConcurrencyConflict
from sessionledger.domain.records import Draft
from sessionledger.domain.write_plans import appended_event
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.compaction_runs import Outcome, gives_up, is_outage, retry_delay
from sessionledger.infrastructure.failures import database_unavailable
from sessionledger.infrastructure.queue_names import (
    COMPACT_TASK,
    EVALUATE_TASK,
    INGEST_TASK,
    SWEEP_TASK,
    partition_of,
)
from sessionledger.infrastructure.tracing import (
    INGEST,
    Span,
    SpanKind,
    current_carrier,
    links_to,
    task_context,
    traced,
    within,
)
from sessionledger.infrastructure.wire import (
    PublisherIdentity,
    UndecodableEvent,
    decode_draft,
    session_of_line,
)
from sessionledger.workers import metrics
from sessionledger.workers.app import settings_of
from sessionledger.workers.dlq import REPLAY_HEADER, DeadLetter, dead_letters, replay_refusal, route_of
from sessionledger.workers.metrics import log_event
from sessionledger.workers.runtime import WorkerRuntime, close_runtimes, runtime_of

log = logging.getLogger(__name__)

T = TypeVar("T")


class Redelivered(RuntimeError):
    """The broker delivered a message again because the worker running it was lost."""


class LedgerTask(Task[..., Any]):
    """Late ack; failures retried with exponential backoff up to `max_retries`, then dead-lettered.

    A message the broker redelivers (its worker died, the connection dropped) counts as a
    retry too, so a message that kills its worker cannot loop forever. A database that cannot be
    reached is not the work's fault: it is retried until the retries have surely waited
    `database_retry_window` seconds (a failover), however many retries that takes.
    """

    acks_late = True
    reject_on_worker_lost = True
    counts_redeliveries = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.counts_redeliveries and self.redelivered:
            self.retry_later(Redelivered("delivered again after its worker was lost"))
        return super().__call__(*args, **kwargs)

    @property
    def redelivered(self) -> bool:
        """Whether the broker delivered this message again (its worker was lost, or the connection)."""
        return bool((self.request.delivery_info or {}).get("redelivered"))

    def retry_later(self, error: Exception) -> NoReturn:
        settings = settings_of(self.app)
        retries = self.request.retries or 0
        if gives_up(settings, retries, error):
            self.give_up(f"{type(error).__name__}: {error} (gave up after {retries} retries)")
        # the decision is made above: Celery's own retry limit must not make it again
        countdown = retry_delay(settings, retries, is_outage(error))
        raise self.retry(exc=error, countdown=countdown, max_retries=retries + 1)

    def give_up(self, reason: str) -> NoReturn:
        """Dead-letter the work and ack it; if even that fails, requeue it for later."""
        try:
            dead_letters(self.app).send(self.dead_letter(reason))
        except Exception:
            log.exception("could not dead-letter %s[%s]; requeued", self.name, self.request.id)
            time.sleep(1)
            raise Reject(reason, requeue=True) from None
        raise Ignore()

    def dead_letter(self, reason: str) -> DeadLetter:
        return dead_letter_of(self, list(self.request.args or ()), dict(self.request.kwargs or {}), reason)


def dead_letter_of(task: Task[..., Any], args: list[Any], kwargs: dict[str, Any], reason: str) -> DeadLetter:
    names = settings_of(task.app).queue_names
    if task.name == INGEST_TASK:
        lines = args[0] if args and isinstance(args[0], list) else [json.dumps(args)]
        sessions = [s for s in map(session_of_line, lines) if s]
        queue = names.ingest(partition_of(sessions[0], names.partitions)) if sessions else names.ingest(0)
        return DeadLetter.of_events(lines, queue, reason, sessions)
    return DeadLetter.of_task(task.name, args, kwargs, route_of(task.name, names), reason)


@signals.task_failure.connect
def _dead_letter_lost_work(sender: Task[..., Any] | None = None, exception: Any = None, **info: Any) -> None:
    """A task that failed outside its own handling: its pool process lost after the last retry,
    the hard time limit, an unexpected error in ingest. Its work goes to the dead-letter queue."""
    if not isinstance(sender, LedgerTask):
        return
    try:
        reason = f"{type(exception).__name__}: {exception}"
        dead_letters(sender.app).send(
            dead_letter_of(sender, list(info.get("args") or ()), dict(info.get("kwargs") or {}), reason)
        )
    except Exception:
        log.exception("could not dead-letter the failed task %s[%s]", sender.name, info.get("task_id"))


signals.worker_process_shutdown.connect(close_runtimes, weak=False)
signals.worker_shutdown.connect(close_runtimes, weak=False)


# --- ingest ----------------------------------------------------------------------------------


@dataclass
class IngestReport:
    stored: int = 0
    duplicates: int = 0
    poison: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    """reason -> [(line, session id or None)]"""

    def reject(self, reason: str, line: str, session_id: str | None) -> None:
        self.poison.setdefault(reason, []).append((line, session_id))

    def add(self, other: IngestReport) -> None:
        self.stored += other.stored
        self.duplicates += other.duplicates
        for reason, rejected in other.poison.items():
            self.poison.setdefault(reason, []).extend(rejected)


class IngestTask(LedgerTask):
    """A batch whose worker was lost comes back where it was and is stored again, idempotently,
    in place (a retry would be a new message at the back of the partition, and reorder it); its
    redeliveries are counted in the deployment's `RedeliveryCounts` instead, and past
    `max_retries` the batch is dead-lettered: a batch that kills its worker every time cannot
    hold its partition for ever. A redelivery that finds the database down is not counted (the
    outage is not the batch's fault), and a batch that is finally stored forgets its count."""

    counts_redeliveries = False


@shared_task(bind=True, base=IngestTask, name=INGEST_TASK)
def ingest(self: IngestTask, lines: Any) -> dict[str, int]:
    """The batch stored, in a `sessionledger.ingest` span linked to the `publish()` span of each
    event that carries one (`ingest_batch`)."""
    return traced(INGEST, lambda span: ingest_batch(self, lines, span), SpanKind.CONSUMER)


def ingest_batch(self: IngestTask, lines: Any, span: Span) -> dict[str, int]:
    runtime = runtime_of(self.app)
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        self.give_up("malformed batch: the argument must be a list of JSON strings")
    redelivered = self.redelivered
    if redelivered:
        _bound_redeliveries(self, runtime)
    report = IngestReport()
    decoded = decode_lines(lines, report)
    recording = span.is_recording()
    if recording:
        for link in links_to(trace for *_, trace in decoded if trace):
            span.add_link(link.context)
    settings = runtime.settings
    deadline = time.monotonic() + settings.ingest_patience
    service = patiently(lambda: runtime.service, deadline)  # a worker may start before its database
    settle_heap()
    replayed = self.request.get(REPLAY_HEADER) is not None
    for start in range(0, len(decoded), settings.ingest_chunk):
        chunk = decoded[start : start + settings.ingest_chunk]
        store_with_patience(service, chunk, report, deadline, replayed=replayed)
    send_poison(self, report)
    if redelivered:
        runtime.storage.redeliveries.forget(self.request.id)  # type: ignore[arg-type]  # a redelivery's message has its id
    rejected_count = sum(len(r) for r in report.poison.values())
    if recording:
        span.set_attributes(
            {
                "sessionledger.event_count": len(lines),
                "sessionledger.stored_count": report.stored,
                "sessionledger.duplicate_count": report.duplicates,
                "sessionledger.dead_lettered_count": rejected_count,
            }
        )
        wake_in_trace([appended_event(draft).session_id for _, draft, *_ in decoded])
    log_event(
        log,
        "ingested",
        events=len(lines),
        stored=report.stored,
        duplicates=report.duplicates,
        dead_lettered=rejected_count,
        batch=self.request.id,
    )
    return {"stored": report.stored, "duplicates": report.duplicates, "dead_lettered": rejected_count}


def wake_in_trace(session_ids: Sequence[str]) -> None:
    """Evaluate the batch's sessions in the batch's trace (the message carries its context), so
    that the compaction an ingest triggers continues its trace. Only while the ingest span is
    recorded: the relay wakes every session anyway (from the ledger, which holds no trace
    context), and an evaluation more is harmless; a failed send here is logged, never the
    batch's failure."""
    headers = current_carrier()
    try:
        for session_id in dict.fromkeys(session_ids):
            evaluate.apply_async(args=(session_id,), headers=headers)
    except Exception:
        log.warning("could not send the traced evaluations; the relay sends them", exc_info=True)


@functools.cache
def settle_heap() -> None:
    """Once per process, when its storage is open: what is alive then (modules, Celery,
    SQLAlchemy, the pool) lives as long as the process, so the garbage collector stops scanning it
    (`gc.freeze`). A batch makes tens of thousands of objects, each batch triggers full
    collections, and scanning the startup heap in each cost about 10 µs an event."""
    gc.freeze()


def _bound_redeliveries(task: IngestTask, runtime: WorkerRuntime) -> None:
    """Dead-letter a batch delivered again more than `max_retries` times after its worker was lost."""
    try:
        counter = runtime.storage.redeliveries
        deliveries = counter.count(task.request.id)  # type: ignore[arg-type]  # a redelivery's message has its id
    except database_unavailable():
        return  # the database is down: not the batch's fault (storing it waits for the database)
    limit = runtime.settings.max_retries
    if deliveries > limit:
        # a replay from the dead-letter queue starts afresh
        counter.forget(task.request.id)  # type: ignore[arg-type]  # a redelivery's message has its id
        task.give_up(f"delivered again {deliveries} times after its worker was lost (limit {limit})")


def send_poison(task: Task[..., Any], report: IngestReport) -> None:
    """Dead-letter the rejected events, one letter per reason; requeue the batch if the broker fails."""
    sender = dead_letters(task.app)
    try:
        for reason, rejected in report.poison.items():
            sender.send(dead_letter_of(task, [[line for line, _ in rejected]], {}, reason))
    except Exception as error:
        log.exception("could not dead-letter poison events; batch requeued")
        raise Reject(f"dead-letter queue unavailable: {error}", requeue=True) from None


Decoded = tuple[str, Draft, PublisherIdentity, Mapping[str, str] | None]
"""A line of a batch, its event's draft (what the ledger stores of it), the identity of the
publisher that sent it, and the trace context of its `publish()` span, if it carries one."""


def decode_lines(lines: Sequence[str], report: IngestReport) -> list[Decoded]:
    """The events of a batch, in order, each drafted for the ledger as it is decoded (one parse
    of the line: `decode_draft`); undecodable lines go to `report` as poison."""
    decoded = []
    for line in lines:
        try:
            decoded.append((line, *decode_draft(line)))
        except UndecodableEvent as error:
            report.reject(str(error), line, error.session_id)
    return decoded


def store_with_patience(
    service: SessionService,
    items: list[Decoded],
    report: IngestReport,
    deadline: float,
    *,
    replayed: bool = False,
) -> None:
    """`store`, waiting out a database outage (`patiently`); a `replayed` batch (from the
    dead-letter queue) first loses the events that would break their session's order."""

    def attempt() -> IngestReport:
        tried = IngestReport()  # counted only once it went through, not per try
        store(service, in_replay_order(service, items, tried) if replayed else items, tried)
        return tried

    report.add(patiently(attempt, deadline))


def patiently(attempt: Callable[[], T], deadline: float) -> T:
    """`attempt()`, retried with backoff while the database is unavailable, until `deadline` or a
    worker shutdown; then the message is requeued.

    Waiting in place keeps the partition in order; after that the message is requeued (at the
    head of its queue on RabbitMQ; Redis puts a requeued message at the back).
    """
    pause = 0.25
    while True:
        try:
            return attempt()
        except database_unavailable() as error:
            stopping = worker_state.should_stop is not None or worker_state.should_terminate is not None
            if stopping or time.monotonic() + pause > deadline:
                log_event(log, "database unavailable, batch requeued", logging.WARNING, error=str(error))
                raise Reject(f"database unavailable: {error}", requeue=True) from None
            log_event(log, "database unavailable, retrying", logging.WARNING, error=str(error), wait=pause)
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


def in_replay_order(service: SessionService, items: list[Decoded], report: IngestReport) -> list[Decoded]:
    """The replayed events that keep their session's order; the others go to `report` as poison."""
    kept = []
    for item in items:
        line, draft, *_ = item
        event = appended_event(draft)
        refusal = replay_refusal(service, event)
        if refusal is None:
            kept.append(item)
        else:
            report.reject(refusal, line, event.session_id)
    return kept


def store(service: SessionService, items: list[Decoded], report: IngestReport) -> None:
    """Store a run of events in one transaction; an invalid event is found by halving, and rejected alone.

    The service validates every event before storing any, so a run with an invalid event stores
    nothing and its halves are tried in order: per-session order is kept. Events sent by
    publishers of different identities (a replay of dead letters mixes them) are stored run by
    run, in order, each run on behalf of its publisher's identity. The transaction counts what it
    stored (`metrics.INGEST_TALLY`).
    """
    if not items:
        return
    first = items[0][2]
    if not all(item[2] is first or item[2] == first for item in items):  # `is`: decoding shares UNBOUND
        for _, run in groupby(items, key=lambda item: item[2]):
            store(service, list(run), report)
        return
    identity = first
    try:
        outcomes = service.ingest(
            [draft for _, draft, *_ in items], tally=metrics.INGEST_TALLY, **identity.as_dict()
        )
    except ValueError as error:
        if len(items) == 1:
            line, draft, *_ = items[0]
            report.reject(f"invalid event: {error}", line, appended_event(draft).session_id)
            return
        middle = len(items) // 2
        store(service, items[:middle], report)
        store(service, items[middle:], report)
        return
    for (line, draft, *_), outcome in zip(items, outcomes, strict=True):
        if outcome is AppendOutcome.STORED:
            report.stored += 1
        elif outcome is AppendOutcome.DUPLICATE:
            report.duplicates += 1
        elif outcome is AppendOutcome.REFUSED:
            report.reject(
                f"refused: the session does not belong to the publisher's {identity}",
                line,
                appended_event(draft).session_id,
            )
        else:
            report.reject(
                "unknown session (never created, or deleted)", line, appended_event(draft).session_id
            )


# --- evaluate and compact (the decisions are `infrastructure/compaction_runs.py`'s) -----------


@shared_task(bind=True, base=LedgerTask, name=EVALUATE_TASK)
def evaluate(self: LedgerTask, session_id: str) -> Outcome:
    """The session's trigger, in the trace its message carries (an ingest's: `wake_in_trace`)."""
    return within(task_context(self.request), lambda: evaluate_session(self, session_id))


def evaluate_session(self: LedgerTask, session_id: str) -> Outcome:
    runtime = runtime_of(self.app)
    try:
        decision = runtime.compactions.evaluate(session_id)
    except Exception as error:
        self.retry_later(error)
    runtime.metrics.add(metrics.EVALUATIONS)
    if decision is Outcome.COMPACT:
        compact.apply_async(args=(session_id,), headers=current_carrier())
    log_event(log, "evaluated", session_id=session_id, decision=decision)
    return decision


@shared_task(bind=True, base=LedgerTask, name=COMPACT_TASK)
def compact(self: LedgerTask, session_id: str) -> Outcome:
    """The session compacted, in the trace its message carries (its evaluation's)."""
    return within(task_context(self.request), lambda: compact_session(self, session_id))


def compact_session(self: LedgerTask, session_id: str) -> Outcome:
    runtime = runtime_of(self.app)
    try:
        # opening the storage may fail too: retried like the rest
        outcome = runtime.compactions.compact(session_id, self.request.id or "local")
    except Exception as error:
        runtime.metrics.add(metrics.COMPACTIONS_FAILED)
        if isinstance(error, ConcurrencyConflict):
            runtime.metrics.add(metrics.CONFLICTS_RETRIED)
        log_event(log, "compaction failed", logging.WARNING, session_id=session_id, error=repr(error))
        self.retry_later(error)
    if outcome is Outcome.COMPACTED:
        # appends made during the summarizer call were evaluated while the lease was held
        evaluate.apply_async(args=(session_id,), headers=current_carrier())
    return outcome


@shared_task(bind=True, base=LedgerTask, name=SWEEP_TASK)
def sweep(self: LedgerTask) -> int:
    runtime = runtime_of(self.app)
    try:
        deleted = runtime.service.delete_expired_sessions()
    except Exception as error:
        self.retry_later(error)
    if deleted:
        log_event(log, "expired sessions deleted", deleted=deleted)
    return deleted
