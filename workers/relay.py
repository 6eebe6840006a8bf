"""The relay: the ledger is the outbox, and the relay tails it to wake the evaluators.

Every append, made by an ingest worker or by `SessionService` in an agent's process, is a ledger
row with a `global_position`. The relay reads the rows after its stored offset, sends one
`evaluate(session_id)` per session per batch read (with publisher confirms), and only then moves
its offset (`RelayPositions`, stored beside the ledger). If the broker is down when an append
commits, nothing is lost: the row waits in the ledger until the relay can send. Delivery is
at-least-once; evaluating a session twice is harmless.

Global positions are assigned at insert time and committed out of order, and a rolled-back insert
leaves a hole for ever. The relay therefore never moves its offset past a missing position until
that position has been missing for `gap_timeout` seconds (longer than any write transaction),
and remembers what it already sent beyond the hole so it does not send it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path

from celery import Celery
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sessionledger.domain.ports import Ledger, RelayPositions
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.audit.digest import (
    Digest,
    InvalidDigest,
    latest_digest,
    load_private_key,
    take_digest,
    write_digest,
)
from sessionledger.infrastructure.audit.since import BrokenLink, digest_since
from sessionledger.infrastructure.bootstrap import Storage, open_storage
from sessionledger.infrastructure.queue_names import EVALUATE_TASK, SWEEP_TASK
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import settings_of
from sessionledger.workers.metrics import describe_error, log_event, serve_prometheus

log = logging.getLogger(__name__)

RELAY_NAME = "evaluate"


class Relay:
    """One tailer of the ledger; `poll()` reads a batch, wakes its sessions, and moves the offset."""

    def __init__(
        self,
        ledger: Ledger,
        positions: RelayPositions,
        wake: Callable[[Sequence[str]], None],
        *,
        name: str = RELAY_NAME,
        batch: int = 5000,
        gap_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ledger = ledger
        self._positions = positions
        self._wake = wake
        self._name = name
        self.batch = batch
        self._gap_timeout = gap_timeout
        self._clock = clock
        self.offset = positions.load(name)
        self._sent: set[int] = set()  # positions above the offset already handled
        self._holes: dict[int, float] = {}  # missing position -> when it was first seen missing
        self._scanned = self.offset  # holes below this position have their first-seen time

    def poll(self) -> int:
        """One round; returns how many ledger rows it read (a full batch means: poll again now)."""
        rows = self._ledger.tail(self.offset, self.batch)
        fresh = [row for row in rows if row.global_position not in self._sent]
        sessions = list(dict.fromkeys(row.session_id for row in fresh if row.kind == Kind.EVENT))
        if sessions:
            self._wake(sessions)
        self._sent.update(row.global_position for row in fresh)
        moved = self._advance()
        if moved:
            self._positions.save(self._name, self.offset)
        if sessions:
            log_event(log, "sessions woken", sessions=len(sessions), rows=len(fresh), offset=self.offset)
        return len(rows)

    def _advance(self) -> bool:
        """Move the offset over every handled position and every hole older than `gap_timeout`.

        Every hole below the highest handled position is timed from the round that first saw it,
        not from when the offset reached it: holes seen together are waited for together (35
        holes left by one outage cost one `gap_timeout`, not 35 in turn).
        """
        start = self.offset
        now = self._clock()
        top = max(self._sent, default=self.offset)
        for position in range(max(self._scanned, self.offset) + 1, top):
            if position not in self._sent:
                self._holes.setdefault(position, now)
        self._scanned = max(self._scanned, top)
        while self.offset < top:
            following = self.offset + 1
            if following in self._sent:
                self._sent.discard(following)
            elif now - self._holes[following] < self._gap_timeout:
                break
            else:
                log_event(log, "skipping a permanent hole in the ledger", logging.DEBUG, position=following)
            self._holes.pop(following, None)
            self.offset = following
        return self.offset != start


class EvaluateSender:
    """Sends `evaluate(session_id)` tasks through the application (confirmed publishes)."""

    def __init__(self, celery: Celery) -> None:
        self._celery = celery

    def __call__(self, session_ids: Sequence[str]) -> None:
        with self._celery.producer_or_acquire() as producer:
            for session_id in session_ids:
                self._celery.send_task(EVALUATE_TASK, args=[session_id], producer=producer)

    def sweep(self) -> None:
        self._celery.send_task(SWEEP_TASK)


def run_relay(celery: Celery, stop: threading.Event | None = None) -> None:
    """Run the relay until `stop` is set (or for ever): `sessionledger relay`.

    Also sends a `sweep` every `sweep_interval` seconds, since exactly one relay runs.
    """
    settings = settings_of(celery)
    stop = stop or threading.Event()
    sender = EvaluateSender(celery)
    with open_storage(settings, index_text=True) as storage:
        server = _serve_metrics(settings, storage) if settings.metrics_port else None
        log_event(
            log,
            "relay started",
            broker=hide_passwords(settings.broker_url or ""),
            database=hide_passwords(settings.database_url),
            metrics_port=settings.metrics_port,
        )
        stood_by = threading.Event()

        def standing_by() -> None:
            stood_by.set()
            log_event(log, "relay standing by: another relay leads; this one takes over when it stops")

        try:
            with storage.relay_positions.leadership(RELAY_NAME, stop, standing_by) as leading:
                if not leading:
                    return
                relay = Relay(
                    storage.service.ledger,
                    storage.relay_positions,
                    sender,
                    batch=settings.relay_batch,
                    gap_timeout=settings.relay_gap_timeout,
                )
                log_event(log, "relay leading", offset=relay.offset, took_over=stood_by.is_set())
                digests = None
                if settings.digest_every is not None and settings.digest_dir is not None:
                    key = (
                        None
                        if settings.digest_sign_key is None
                        else load_private_key(settings.digest_sign_key)
                    )
                    digests = DigestSchedule(
                        storage.service.ledger, settings.digest_dir, settings.digest_every, key
                    )
                relay_forever(relay, sender, settings.relay_interval, settings.sweep_interval, stop, digests)
        finally:
            if server is not None:
                server.shutdown()


def _serve_metrics(settings: Settings, storage: Storage) -> ThreadingHTTPServer:
    """`/metrics` in Prometheus text, from the relay: there is exactly one per deployment."""
    from sessionledger.workers.stats import collect_stats

    return serve_prometheus(
        settings.metrics_port or 0,
        lambda: collect_stats(settings, storage).prometheus(),
        host=settings.metrics_host,
    )


class DigestSchedule:
    """Ledger digests written every `every` seconds into `directory` (`--digest-every`,
    `--digest-dir`), the first at once: one file per digest, named by the time it was taken, so
    that a digest is never overwritten and the directory can be shipped elsewhere as it grows.

    Each digest is resumed from the one before (`digest_since`), so its cost follows the records
    written in between, not the ledger's size nor its sessions; the first of a process from the
    newest digest in the directory, a relay before this one's (its signature checked with the
    key's public half), so the chain of trust runs on across restarts instead of starting over from
    whatever the ledger holds at start. Only a directory with no digest (or one whose newest digest
    has no Merkle peaks to resume from: an older release's) costs a whole digest (`take_digest`).
    When the ledger no longer extends the last digest in a session written to in between (a record
    it covers was rewritten or removed), or the newest digest in the directory is not one of ours
    (unreadable, edited, or its signature does not verify), no digest is written, which would vouch
    for the rewrite: the reason is logged as an error at every turn until an operator acts. A
    session nobody wrote to is carried over as the last digest holds it, so a rewrite of it is
    never vouched for either (`verify --since --all-heads` finds it: docs/proofs.md "Incremental
    verify")."""

    def __init__(
        self, ledger: Ledger, directory: Path, every: float, key: Ed25519PrivateKey | None = None
    ) -> None:
        self._ledger = ledger
        self._directory = directory
        self._every = every
        self._key = key
        self._next = time.monotonic()
        self._last: Digest | None = None

    def due(self) -> None:
        """Write a digest if it is time to."""
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._every
        try:
            last = self._last if self._last is not None else self._newest_written()
            digest = self._resumed(last)
        except (BrokenLink, InvalidDigest) as refused:
            findings = (
                [str(f.kind) for r in refused.check.results for f in r.findings]
                if isinstance(refused, BrokenLink)
                else []
            )
            log_event(log, "digest withheld", logging.ERROR, reason=str(refused), findings=findings)
            return
        self._last = digest
        if self._key is not None:
            digest = digest.signed(self._key)
        name = digest.taken_at.strftime("digest-%Y%m%dT%H%M%S.%fZ.json")
        write_digest(digest, self._directory / name)
        log_event(log, "digest written", file=str(self._directory / name), sessions=len(digest.sessions))

    def _newest_written(self) -> Digest | None:
        """The newest digest in the directory (`None`: there is none), its signature checked when
        this relay signs; `InvalidDigest` when that file is not a digest of ours."""
        return latest_digest(self._directory, None if self._key is None else self._key.public_key())

    def _resumed(self, last: Digest | None) -> Digest:
        """The ledger's digest now, resumed from `last` when it can be (`BrokenLink` when the ledger
        no longer extends it)."""
        if last is not None:
            try:
                return digest_since(self._ledger, last)
            except InvalidDigest as older:  # no Merkle peaks to resume from: an older release's
                log_event(log, "digest taken whole", logging.WARNING, reason=str(older))
        return take_digest(self._ledger)


def relay_forever(
    relay: Relay,
    sender: EvaluateSender,
    interval: float,
    sweep_every: float,
    stop: threading.Event,
    digests: DigestSchedule | None = None,
) -> None:
    backoff = interval
    next_sweep = time.monotonic() + sweep_every
    while not stop.is_set():
        try:
            read = relay.poll()
            if time.monotonic() >= next_sweep:
                sender.sweep()
                next_sweep = time.monotonic() + sweep_every
            if digests is not None:
                digests.due()
        except Exception as error:
            log_event(
                log,
                "relay round failed, retrying",
                logging.WARNING,
                error=describe_error(error),
                wait=backoff,
            )
            stop.wait(backoff)
            backoff = min(backoff * 2, 10.0)
            continue
        backoff = interval
        if read < relay.batch:
            stop.wait(interval)
