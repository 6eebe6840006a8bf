"""What the queue did, where an operator looks: counters, structured logs, Prometheus text.

Counters live in the deployment's `CounterStore` (a table beside the ledger), so the work of
every worker process and container adds up in one place that `sessionledger stats` (and
`/metrics`) read, live. What a ledger write does is counted by that write, in its transaction
(`INGEST_TALLY`, `COMPACTION_TALLY`): a worker killed at any moment leaves the figures equal to
what was stored. The rest is added as it happens (`Metrics`). Logs are one JSON object per line,
with the session id as a field, so they can be filtered per session.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

from sessionledger.domain.append_outcomes import Tally
from sessionledger.domain.ports import CounterStore
from sessionledger.infrastructure.failures import database_unavailable
from sessionledger.infrastructure.http_listener import HttpListener
from sessionledger.infrastructure.redaction import hide_passwords

EVENTS_INGESTED = "events_ingested"
DUPLICATES_SKIPPED = "duplicates_skipped"
EVALUATIONS = "evaluations"
COMPACTIONS_RUN = "compactions_run"
COMPACTIONS_FAILED = "compactions_failed"
CONFLICTS_RETRIED = "conflicts_retried"
DEAD_LETTERED = "dead_lettered"
COUNTERS = (
    EVENTS_INGESTED,
    DUPLICATES_SKIPPED,
    EVALUATIONS,
    COMPACTIONS_RUN,
    COMPACTIONS_FAILED,
    CONFLICTS_RETRIED,
    DEAD_LETTERED,
)
_HELP = {
    EVENTS_INGESTED: "Events stored in the ledger by the ingest workers.",
    DUPLICATES_SKIPPED: "Events delivered again (same session and event id) and not stored twice.",
    EVALUATIONS: "Policy evaluations of a session after appends.",
    COMPACTIONS_RUN: "Compactions written back to a session window.",
    COMPACTIONS_FAILED: "Compaction attempts that failed and were retried or dead-lettered.",
    CONFLICTS_RETRIED: "Compaction write-backs that lost a version race and re-read.",
    DEAD_LETTERED: "Messages or events sent to the dead-letter queue.",
}
INGEST_TALLY = Tally(stored=EVENTS_INGESTED, duplicate=DUPLICATES_SKIPPED)
"""What an ingest batch adds to the counters, in its own transaction."""
COMPACTION_TALLY = Tally(compaction=COMPACTIONS_RUN)
"""What a compaction's write adds to the counters, in its own transaction."""


class Metrics:
    """The counters no ledger write records (evaluations, failures, dead letters): each `add`
    goes to the shared store at once, so the figures are live and a killed process has lost
    nothing it counted, but for what the store refused while the database was down (kept and
    added with the next count, or at shutdown by `flush`).

    `store` is called on the first count, so a process that never counts anything never opens
    the store.
    """

    def __init__(self, store: Callable[[], CounterStore]) -> None:
        self._pending: Counter[str] = Counter()
        self._totals: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._store = store

    def add(self, name: str, amount: int = 1) -> None:
        if amount:
            with self._lock:
                self._pending[name] += amount
                self._totals[name] += amount
            self.flush()

    def totals(self) -> dict[str, int]:
        """What this process counted since it started."""
        with self._lock:
            return {name: self._totals[name] for name in COUNTERS}

    def flush(self) -> None:
        """Add the pending deltas to the store (kept for the next flush if that fails)."""
        with self._lock:
            deltas, self._pending = dict(self._pending), Counter()
        if not deltas:
            return
        try:
            self._store().add(deltas)
        except database_unavailable():
            logging.getLogger(__name__).warning("could not store counters, keeping them", exc_info=True)
            with self._lock:
                self._pending.update(deltas)


def read_counters(store: CounterStore) -> dict[str, int]:
    """Every counter's total across all worker processes (0 for those never counted)."""
    stored = store.totals()
    return {name: stored.get(name, 0) for name in COUNTERS}


def prometheus_text(counters: Mapping[str, int], gauges: Mapping[str, int] | None = None) -> str:
    """The Prometheus text exposition format: counters as `sessionledger_<name>_total`, gauges as is."""
    lines: list[str] = []
    for name, value in counters.items():
        metric = f"sessionledger_{name}_total"
        lines += [f"# HELP {metric} {_HELP.get(name, name)}", f"# TYPE {metric} counter", f"{metric} {value}"]
    for name, value in (gauges or {}).items():
        metric = f"sessionledger_{name}"
        lines += [f"# TYPE {metric} gauge", f"{metric} {value}"]
    return "\n".join(lines) + "\n"


def serve_prometheus(port: int, collect: Any, host: str) -> HttpListener:
    """Serve `collect()` (Prometheus text) at `/metrics` from a daemon thread; returns the server."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/metrics":
                self.send_error(404)
                return
            body = collect().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HttpListener((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="sessionledger-metrics", daemon=True).start()
    return server


def describe_error(error: BaseException) -> str:
    """What went wrong, for a log line: the error's type and message, passwords masked."""
    return hide_passwords(f"{type(error).__name__}: {error}")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's `fields`; no URL's
    password shows (a driver's error may quote one)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return hide_passwords(json.dumps(entry, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """`[time: LEVEL/logger] message key=value ...`, passwords masked: the opt-out of JSON."""

    def __init__(self) -> None:
        super().__init__("[%(asctime)s: %(levelname)s/%(name)s] %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", {})
        return " ".join([super().formatMessage(record), *(f"{k}={v}" for k, v in fields.items())])

    def format(self, record: logging.LogRecord) -> str:
        return hide_passwords(super().format(record))


def use_json_logs(handlers: Iterable[logging.Handler]) -> None:
    for handler in handlers:
        handler.setFormatter(JsonFormatter())


def log_to_stderr(log_format: str, level: int | str = logging.INFO) -> None:
    """Log `level` and above to stderr, one record per line, JSON unless `log_format` is `text`:
    for a process Celery does not set up (the relay)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)


def log_event(logger: logging.Logger, message: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log `message` with structured fields (e.g. `session_id=...`) that the JSON formatter emits."""
    logger.log(level, message, extra={"fields": fields})
