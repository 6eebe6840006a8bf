"""`verify --jobs N`: sessions, and long sessions in ranges of positions, checked by N processes.

Reading and checking a record is Python work per row (hashes, payload parsing, replay), so one
process verifies at about two thirds of a raw read's rate; N processes share it out. The parent
reads, in one snapshot, the sessions' rows and window slots (the heads, versions and stored
windows to check against), then hands out ranges of at most `SPAN` positions (a long session in
equal ranges, as many as a multiple of N, so that each process gets its share). A worker reads its
range in a snapshot of its own, checks the chain inside it (`chain.first_break` from the range's
first link), folds it into a `domain.replay.ReplayPart` and measures its readable events for the
window stats; only that, not the records, travels back. The parent checks that consecutive
ranges link (a range's first record names the previous range's last hash) and meet, folds the
parts in order (`domain.replay.fold_parts`), and compares the projection with what is stored
exactly as the one-process `verify` does (`verify.projection_mismatches`).

Ranges stop at the head the parent read, so records appended meanwhile are not read; a session
deleted while it is being verified can show its erased payloads as a break: verify it again.
Workers are forked, and forget the parent's connections before opening their own.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from sessionledger.domain.audit_port import END, AuditLedger, StoredSession
from sessionledger.domain.mappings import FrozenDict
from sessionledger.domain.records import LedgerRecord
from sessionledger.domain.replay import Projection, ReplayPart, fold_parts, replay_part, window_shape
from sessionledger.domain.window_stats import EventMeasure, event_measure, stats_of_measures
from sessionledger.infrastructure.audit.chain import BreakKind, ChainBreak, ChainHead, first_break
from sessionledger.infrastructure.audit.reader import stored_projection
from sessionledger.infrastructure.audit.shared_state import SharedStateFold
from sessionledger.infrastructure.audit.verify import (
    UNREADABLE_ERRORS,
    Finding,
    Mismatch,
    Verification,
    projection_mismatches,
    unreadable,
    verify,
    verify_all,
    with_shared_state,
)
from sessionledger.infrastructure.service import SessionService

SPAN = 25_000
"""Positions per task at most: small enough to share a long session out, large enough that a
task's own snapshot and first query cost little against its rows."""

_LEDGER: AuditLedger | None = None
"""The worker process's ledger: the parent's, its inherited connections forgotten."""


@dataclass(frozen=True, slots=True)
class _Task:
    session_id: str
    after: int
    upto: int
    upto_version: int | None
    head: ChainHead | None
    """The head the session row names (for the session's last range only)."""
    erased: bool
    app_user: tuple[str, str] | None
    window_base: int = 0
    prefix: frozenset[int] = frozenset()
    """The stored window (its base, its prefix): only its events are measured for the stats.
    Enough, because the stats are compared only once the stored window equals the replayed one."""


@dataclass(slots=True)
class _Range:
    """What a worker sends back for one range."""

    task: _Task
    first: tuple[int, str] | None = None
    """The first record's position and the hash it names for its predecessor."""
    last: tuple[int, str] | None = None
    """The last record's position and row hash."""
    broken: ChainBreak | None = None
    created: LedgerRecord | None = None
    part: ReplayPart | None = None
    events: list[int] = field(default_factory=list)
    measures: dict[int, EventMeasure] = field(default_factory=dict)
    replay_error: str | None = None
    read_error: str | None = None
    fold: SharedStateFold = field(default_factory=SharedStateFold)


JOBS_PER_CPU = 2
"""`jobs` is at most this many times the CPUs the process may run on: the checking is Python work,
so processes beyond the CPUs only take turns on them, and twice leaves room for the time each one
waits on the database. `--jobs 100000` was still forking after a minute (issue 25)."""


def max_jobs() -> int:
    """The most processes `verify_parallel` starts on this machine (`JOBS_PER_CPU` per usable CPU)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS): every CPU
        cpus = os.cpu_count() or 1
    return JOBS_PER_CPU * cpus


def check_jobs(jobs: int) -> int:
    """`jobs`, or a `ValueError` when it is more than `max_jobs()`."""
    most = max_jobs()
    if jobs > most:
        raise ValueError(
            f"--jobs is at most {most} on this machine ({JOBS_PER_CPU} per usable CPU), got {jobs}"
        )
    return jobs


def verify_parallel(
    service: SessionService, jobs: int, session_ids: Sequence[str] | None = None
) -> list[Verification]:
    """`verify` of the sessions (all of them, and the shared state, by default) in `jobs` processes
    (at most `max_jobs()`, else a `ValueError`); on a ledger forked processes cannot read
    (`AuditLedger.readable_from_forks`: memory), in this one."""
    check_jobs(jobs)
    ledger = service.ledger
    if not ledger.readable_from_forks or jobs < 2:
        return _in_this_process(service, session_ids)
    try:
        with ledger.audit_snapshot() as snapshot:  # the heads, versions and stored windows, at once
            wanted = snapshot.session_ids() if session_ids is None else list(session_ids)
            stored = {found.session_id: found for found in snapshot.stored(session_ids)}
    except UNREADABLE_ERRORS:  # a session row changed outside the ledger: each is read alone
        return _in_this_process(service, session_ids)
    tasks = [task for sid in wanted for task in _tasks(sid, stored.get(sid), jobs)]
    context = multiprocessing.get_context("fork")
    chunks = max(1, len(tasks) // (jobs * 8))
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_forget, initargs=(ledger,)) as pool:
        ranges = list(pool.map(_check_range, tasks, chunksize=chunks))
    by_session: dict[str, list[_Range]] = {}
    for checked in ranges:
        by_session.setdefault(checked.task.session_id, []).append(checked)
    fold = SharedStateFold()
    results = []
    for session_id in wanted:
        parts = by_session[session_id]
        for checked in parts:
            fold.merge(checked.fold)
        results.append(_verification(session_id, parts, stored.get(session_id)))
    if session_ids is None:
        return list(with_shared_state(results, fold, ledger))
    return results


def _in_this_process(service: SessionService, session_ids: Sequence[str] | None) -> list[Verification]:
    """`verify_parallel`'s answer from this process alone, each session read on its own."""
    if session_ids is None:
        return list(verify_all(service))
    return [verify(service, sid) for sid in session_ids]


def _tasks(session_id: str, stored: StoredSession | None, jobs: int) -> Iterator[_Task]:
    """A session's ranges: one when it is short, else ranges of equal size, at most `SPAN`, and as
    many as a multiple of `jobs`, so that a session read alone is shared out evenly (no short last
    range read while the other processes wait)."""
    if stored is None:  # records but no session row: one range, to its end
        yield _Task(session_id, 0, END, None, None, False, None)
        return
    erased = stored.deleted
    head = ChainHead(*stored.head)
    app_user = (stored.app_name, stored.user_id)
    upto_version = None if erased else stored.version
    prefix = frozenset(stored.prefix)
    end = max(head.position, 1)
    ranges = -(-end // SPAN)
    span = end if ranges == 1 else -(-end // (-(-ranges // jobs) * jobs))
    for after in range(0, end, span):
        last = after + span >= head.position
        upto = END if last else after + span
        yield _Task(
            session_id, after, upto, upto_version, head if last else None, erased, app_user,
            stored.window_base, prefix,
        )  # fmt: skip


def _forget(ledger: AuditLedger) -> None:
    """In a forked worker: forget the parent's connections, and read the ledger afresh."""
    global _LEDGER
    ledger.after_fork()
    _LEDGER = ledger


def _check_range(task: _Task) -> _Range:
    """In a worker: read the range, check its chain, fold its replay and measure its events."""
    if _LEDGER is None:
        raise RuntimeError("a verify worker runs only in a pool started by verify_parallel")
    checked = _Range(task)
    try:
        with _LEDGER.audit_snapshot() as snapshot:
            records, digests = snapshot.records(task.session_id, task.after, task.upto)
    except UNREADABLE_ERRORS as error:
        checked.read_error = str(error)
        return checked
    if not records:
        return checked
    checked.first = (records[0].position, records[0].prev_hash)
    checked.last = (records[-1].position, records[-1].row_hash)
    linked = None if task.after == 0 else ChainHead(task.after, records[0].prev_hash)
    checked.broken = first_break(records, digests, task.head, linked, erased=task.erased or None)
    if records[0].position == 1:
        checked.created = records[0]
    checked.fold.add(records, task.app_user)
    try:
        part = replay_part(records, task.upto_version)
        checked.events = list(part.events)
        checked.measures = {
            p: event_measure(r.event(), r.token_count)
            for p, r in part.events.items()
            if r.payload is not None and (p > task.window_base or p in task.prefix)
        }
    except UNREADABLE_ERRORS as error:
        checked.replay_error = repr(error)
        return checked
    part.events = {}
    checked.part = part
    return checked


def _verification(session_id: str, ranges: list[_Range], stored: StoredSession | None) -> Verification:
    ranges.sort(key=lambda checked: checked.task.after)
    read_error = next((checked.read_error for checked in ranges if checked.read_error is not None), None)
    if read_error is not None:
        return unreadable(session_id, read_error)
    findings = [Finding(found.kind, found.position, found.detail) for found in _chain(ranges)][:1]
    last = next((checked.last for checked in reversed(ranges) if checked.last is not None), None)
    created = ranges[0].created
    deleted = any(checked.part is not None and checked.part.deleted for checked in ranges)
    if last is None:
        return Verification(
            session_id, 0, 0, "", deleted, (Finding(BreakKind.DELETED, 1, "the session has no records"),)
        )
    events = [p for checked in ranges for p in checked.events]
    projection = None if stored is None else stored_projection(stored, events)
    if projection is None:
        findings.append(Finding(Mismatch.SESSION, None, "the ledger has records but no session row"))
    elif created is None:
        findings.append(Finding(Mismatch.SESSION, 1, "the ledger does not start with a created record"))
    else:
        measures = {p: m for checked in ranges for p, m in checked.measures.items()}
        findings += projection_mismatches(
            projection,
            deleted=deleted,
            created=created,
            project=lambda: _projected(ranges),
            expected_stats=lambda replayed: stats_of_measures(
                measures[p] for p in replayed.window_positions if p in measures
            ),
        )
    version = max((checked.part.version for checked in ranges if checked.part is not None), default=0)
    return Verification(session_id, last[0], version, last[1], deleted, tuple(findings))


def _chain(ranges: list[_Range]) -> Iterator[ChainBreak]:
    """Breaks inside the ranges and between them, in position order."""
    previous: tuple[int, str] | None = None
    for checked in ranges:
        task = checked.task
        if checked.first is not None and task.after > 0:
            if previous is None or previous[0] != task.after:
                missing = 1 if previous is None else previous[0] + 1
                yield ChainBreak(missing, BreakKind.DELETED, f"no record at position {missing}")
            elif checked.first[0] == task.after + 1 and checked.first[1] != previous[1]:
                yield ChainBreak(
                    task.after,
                    BreakKind.EDITED,
                    f"record {task.after} was rewritten: record {task.after + 1} names a different hash "
                    "for its predecessor",
                )
        if checked.broken is not None:
            yield checked.broken
        if checked.last is not None:
            previous = checked.last


def _projected(ranges: list[_Range]) -> Projection:
    """The projection the ranges' parts make (window events left out: their measures stand in)."""
    for checked in ranges:
        if checked.replay_error is not None:
            raise ValueError(f"the records cannot be replayed: {checked.replay_error}")
    part = fold_parts(checked.part for checked in ranges if checked.part is not None)
    shape, epoch = window_shape(part.shaping)
    archived, window = shape.split(p for checked in ranges for p in checked.events)
    return Projection(
        window=(),
        archived=(),
        hidden=tuple(sorted(shape.hidden)),
        session_state=FrozenDict(part.state),
        version=part.version,
        window_positions=tuple(window),
        archived_positions=tuple(archived),
        deleted=part.deleted,
        shape=shape,
        epoch=epoch,
    )
