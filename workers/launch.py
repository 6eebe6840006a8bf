"""What `sessionledger worker` runs: one role per process, or all of them for a local setup.

Roles: `ingest` (a solo worker on some or all ingest partitions: per-session order), `tasks`
(a prefork worker for evaluate and compact), `relay` (tails the ledger; one per deployment, a
second one waits as a standby on PostgreSQL), and `all` (the three as child processes, each
restarted if it dies). `python -m sessionledger.workers.launch ROLE [...]` is the same entry point.

Each process runs on the settings it was handed: the `sessionledger` command passes its own (its
options over the environment); `python -m sessionledger.workers.launch` builds them from the
environment when it starts, or reads them as JSON from standard input (`--settings-from-stdin`),
which is how `all` hands its settings to its children: nothing secret on a command line, and
nothing added to an environment that the workers' own children would inherit.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from sessionledger.infrastructure.bootstrap import check_database_url, open_engine
from sessionledger.infrastructure.policies import policies_from_settings
from sessionledger.infrastructure.settings import MEMORY_URL, Settings
from sessionledger.infrastructure.summarizers.factory import summarizer_from_settings
from sessionledger.workers.app import check_broker, create_app, required_broker, worker_arguments
from sessionledger.workers.failures import operator_message
from sessionledger.workers.telemetry import configure_tracing

ROLES = ("all", "ingest", "tasks", "relay")


def run_worker(
    settings: Settings,
    role: str = "all",
    *,
    partitions: str = "all",
    concurrency: int | None = None,
    loglevel: str = "INFO",
) -> int:
    """Run the role on those settings until stopped (SIGINT/SIGTERM); returns the exit status.

    `ValueError` for an option out of place (`check_options`); what `check_start` finds wrong
    stops it before it starts.
    """
    chosen = check_options(settings, role, partitions, concurrency, loglevel)
    check_start(settings)
    if role != "all":  # the supervisor's children configure their own
        configure_tracing(settings, role)
    if role == "relay":
        from sessionledger.workers.metrics import log_to_stderr
        from sessionledger.workers.relay import run_relay

        log_to_stderr(
            settings.log_format, loglevel.upper()
        )  # Celery sets up the workers' logging, not the relay's
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        run_relay(create_app(settings), stop)
        return 0
    if role == "all":
        check_ledger(settings)
        return _supervise(settings, partitions, concurrency, loglevel)
    argv = worker_arguments(
        settings,
        role,
        partitions=chosen if role == "ingest" else None,
        concurrency=concurrency,
        loglevel=loglevel,
    )
    # the indexer in ingest workers (one solo process each: they write nearly every event) and in
    # the relay, so that a deployment of either keeps the index; not in the task pools' processes
    create_app(settings, index_text=role == "ingest").worker_main(argv)
    return 0


def check_options(
    settings: Settings, role: str, partitions: str, concurrency: int | None, loglevel: str
) -> list[int]:
    """Every option of a worker checked at once, before any role starts (`ValueError` with the
    reason: a child of `all` refusing its options would otherwise be restarted for ever); returns
    the chosen ingest partitions."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"--concurrency must be at least 1, got {concurrency}")
    if not isinstance(logging.getLevelName(loglevel.upper()), int):
        raise ValueError(f"unknown log level {loglevel!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL")
    from sessionledger.infrastructure.queue_names import parse_partitions

    return parse_partitions(partitions, settings.partitions)


def check_start(settings: Settings) -> None:
    """What a worker process can find wrong before it takes any work, raised with the reason: no
    broker URL, a database URL that names no database (`ValueError`), a compaction policy that does
    not parse (`ValueError`; a worker would otherwise start and dead-letter every evaluation), a
    broker that does not answer or refuses the login (the transport's error)."""
    broker_url = required_broker(settings)
    check_database_url(settings)
    policies_from_settings(lambda: summarizer_from_settings(settings), settings)
    check_broker(broker_url)


def check_ledger(settings: Settings) -> None:
    """What stops `all`'s relay at its start (a database it cannot connect to, or a schema it cannot
    bring up to date: the driver's error), found before any role starts: the whole worker would
    stop with it, after its ingest and task workers had started, said they were ready and shut
    down again. `--role ingest` and `tasks` alone wait out such a database instead (it may be an
    outage), so only `all` checks it here."""
    if settings.database_url != MEMORY_URL:
        open_engine(settings).dispose()


def _supervise(settings: Settings, partitions: str, concurrency: int | None, loglevel: str) -> int:
    """Ingest, tasks and relay as child processes on these settings; one that dies is restarted; a
    signal stops them all. A child that exits with status 2 cannot start (its options or settings,
    or a database or broker that refuses it): restarting it would fail the same way every second,
    so it stops them all, and the worker exits with 2 for its operator or process manager to see."""
    workers = [f"--concurrency={concurrency}"] if concurrency else []
    commands = {
        "ingest": _command("ingest", f"--partitions={partitions}", f"--loglevel={loglevel}"),
        "tasks": _command("tasks", f"--loglevel={loglevel}", *workers),
        "relay": _command("relay"),
    }
    handed = settings.model_dump_json().encode()
    children = {role: _start(command, handed) for role, command in commands.items()}
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    status = 0
    while not stopping.wait(1.0):
        for role, child in children.items():
            if child.poll() is None:
                continue
            if child.returncode == 2:
                print(
                    f"sessionledger: {role} cannot start (exit status 2), stopping the worker",
                    file=sys.stderr,
                )
                status = 2
                stopping.set()
                break
            print(f"sessionledger: {role} exited with {child.returncode}, restarting", file=sys.stderr)
            children[role] = _start(commands[role], handed)
    for child in children.values():
        child.terminate()
    deadline = time.monotonic() + 60
    for child in children.values():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    return status


def _command(role: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "sessionledger.workers.launch", role, "--settings-from-stdin", *options]


def _start(command: list[str], settings_json: bytes) -> subprocess.Popen[bytes]:
    """A child process, handed its settings on standard input."""
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert child.stdin is not None
    try:
        with child.stdin:
            child.stdin.write(settings_json)
    except BrokenPipeError:  # it died before reading them; the supervisor sees it exit and restarts it
        pass
    return child


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sessionledger.workers.launch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--partitions", default="all", help="ingest partitions, e.g. 0-3,6 (default: all)")
    parser.add_argument("--concurrency", type=int, default=None, help="task worker processes")
    parser.add_argument("--loglevel", default="INFO")
    parser.add_argument(
        "--settings-from-stdin",
        action="store_true",
        help="read the settings as JSON from standard input instead of from the environment",
    )
    options = parser.parse_args(argv)
    settings = None
    try:
        if options.settings_from_stdin:
            settings = Settings.model_validate_json(sys.stdin.buffer.read())
        else:
            settings = Settings()
        return run_worker(
            settings,
            options.role,
            partitions=options.partitions,
            concurrency=options.concurrency,
            loglevel=options.loglevel,
        )
    except Exception as error:
        message = operator_message(error, settings)
        if message is None:
            raise
        print(f"sessionledger: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
