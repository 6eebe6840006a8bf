"""What `sessionledger worker` runs: one role per process, or all of them for a local setup.

Roles: `ingest` (a solo worker on some or all ingest partitions: per-session order), `tasks`
(a prefork worker for evaluate and compact), `relay` (tails the ledger; one per deployment, a
second one waits as a standby on PostgreSQL), and `all` (the three as child processes, each
restarted if it dies). `python -m workers.launch ROLE [...]` is the same entry point.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from sessionledger.workers.app import app, settings_of, worker_arguments

ROLES = ("all", "ingest", "tasks", "relay")


def run_worker(
    role: str = "all",
    *,
    partitions: str = "all",
    concurrency: int | None = None,
    loglevel: str = "INFO",
) -> int:
    """Run the role until stopped (SIGINT/SIGTERM); returns the exit status."""
    settings = settings_of(app)
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    if role == "relay":
        from sessionledger.workers.relay import run_relay

        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        run_relay(app, stop)
        return 0
    if role == "all":
        return _supervise(partitions, concurrency, loglevel)
    from sessionledger.infrastructure.queue_names import parse_partitions

    chosen = parse_partitions(partitions, settings.partitions) if role == "ingest" else None
    argv = worker_arguments(settings, role, partitions=chosen, concurrency=concurrency, loglevel=loglevel)
    app.worker_main(argv)
    return 0


def _supervise(partitions: str, concurrency: int | None, loglevel: str) -> int:
    """Ingest, tasks and relay as child processes; one that dies is restarted; a signal stops them all."""
    workers = [f"--concurrency={concurrency}"] if concurrency else []
    commands = {
        "ingest": _command("ingest", f"--partitions={partitions}", f"--loglevel={loglevel}"),
        "tasks": _command("tasks", f"--loglevel={loglevel}", *workers),
        "relay": _command("relay"),
    }
    children = {role: subprocess.Popen(command) for role, command in commands.items()}
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    while not stopping.wait(1.0):
        for role, child in children.items():
            if child.poll() is not None:
                print(f"sessionledger: {role} exited with {child.returncode}, restarting", file=sys.stderr)
                children[role] = subprocess.Popen(commands[role])
    for child in children.values():
        child.terminate()
    deadline = time.monotonic() + 60
    for child in children.values():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    return 0


def _command(role: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "sessionledger.workers.launch", role, *options]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.launch", description=__doc__)
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--partitions", default="all", help="ingest partitions, e.g. 0-3,6 (default: all)")
    parser.add_argument("--concurrency", type=int, default=None, help="task worker processes")
    parser.add_argument("--loglevel", default="INFO")
    options = parser.parse_args(argv)
    return run_worker(
        options.role,
        partitions=options.partitions,
        concurrency=options.concurrency,
        loglevel=options.loglevel,
    )


if __name__ == "__main__":
    sys.exit(main())
