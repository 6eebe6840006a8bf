"""How much of the machine PostgreSQL's keyword indexer (`text_index.TextIndexer`) may take, so that
it works in the writers' spare capacity rather than in their time.

Indexing a row into the trigram GIN costs many times its append (text_index.py's docstring), so
an indexer at full speed beside a loading writer took the ingest's ratio to COPY 31% lower on a
2-core machine. `Pacing` caps its duty cycle while writes flow: after a batch that took `t`
seconds, and during which the ledger grew, it rests `rest * t` (the default 9: at most a tenth of
the time indexing; with 3, a quarter, an append beside an indexer catching up on an ingest lost
0.08 of its ratio to the raw INSERT, against 0.015-0.054 with 9); when nothing was appended during
the batch, the ledger is idle and the next batch follows at once, so the index catches up at full
speed between bursts.

The backlog is bounded. While writes flow the indexer still indexes at a tenth of its full rate
(R/10, R about 3,000-4,000 rows/s on the 2-core machine): a write rate under that never leaves it
behind for long, and a faster one grows the backlog only until a session is `BACKLOG_LIMIT` rows
behind its head, past which the indexer stops resting for that session (it takes its full share
from the writers again, which then slow to what it indexes). What the index has not reached is
still searched exactly: a search scans the rows after the session's mark, and takes the scan
whole when the mark is more than `text_index.MAX_CANDIDATES` rows behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BACKLOG_LIMIT", "REST", "Batch", "Pacing"]

REST = 9.0
"""Seconds of rest per second of indexing while writes flow: the indexer takes at most 1/(1+REST)."""
BACKLOG_LIMIT = 250_000
"""Rows a session may fall behind before its indexer stops resting (about a minute's catch-up at
full speed, and a quarter of a GB of text at ~1 KB a row)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one batch did: rows indexed, and how many of the session's rows are still behind."""

    indexed: int
    behind: int


class Pacing:
    """Runs the indexer's batches with a rest after each while the ledger grows (see the module
    docstring). `rest_for` is the wait (the indexer's `threading.Event.wait`, which a stop cuts
    short) and `clock` the monotonic clock, given so that a test counts both."""

    def __init__(
        self,
        rest_for: Callable[[float], object],
        rest: float = REST,
        backlog_limit: int = BACKLOG_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rest_for = rest_for
        self._rest = rest
        self._backlog_limit = backlog_limit
        self._clock = clock

    def run(self, batch: Callable[[], Batch], ledger_grew: Callable[[], bool]) -> int:
        """Run `batch`, then rest in proportion to its time if the ledger grew meanwhile and the
        session is within the backlog limit; the rows it indexed."""
        started = self._clock()
        done = batch()
        if done.indexed and self._rest and done.behind <= self._backlog_limit and ledger_grew():
            self._rest_for(self._rest * (self._clock() - started))
        return done.indexed
