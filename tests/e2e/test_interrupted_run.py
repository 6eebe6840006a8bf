"""A test run stopped by SIGTERM (a CI job's timeout, `kill`) still drops what its fixtures made,
serial or on pytest-xdist's workers, as `make test` runs it; only the run's own process is signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import PG_ADMIN_URL
from tests.e2e.queue_deployment import stop_process, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HOLDING = """
import time
from pathlib import Path

import pytest


@pytest.fixture
def slow_to_stop(pg_url):
    yield pg_url
    time.sleep(STOPPING)


@pytest.mark.parametrize("n", [1, 2])
def test_holds_a_database(n, slow_to_stop):
    Path(__file__).with_name(f"held-{n}").write_text(slow_to_stop.rsplit("/", 1)[1])
    time.sleep(120)
"""
STOPPING = 7
"""Seconds each test's teardown takes before its database is dropped, as a deployment's worker
processes take to stop: more than the 5 s after which an xdist worker is interrupted by itself
when only its controller was, and its controller kills it 10 s after asking it to stop."""


def _existing(names: list[str]) -> list[str]:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        rows = admin.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", [names]).fetchall()
    return [name for (name,) in rows]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_sigterm_to_the_run_drops_every_fixtures_database(workers: list[str], tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pg_url, pytest_configure  # noqa: F401\n"
    )
    (tmp_path / "test_holding.py").write_text(HOLDING.replace("STOPPING", str(STOPPING)))
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            *workers,
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "--basetemp",
            str(tmp_path / "tmp"),
            ".",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    held = [tmp_path / "held-1", tmp_path / "held-2"] if workers else [tmp_path / "held-1"]
    try:
        # a file is named before its name is written: wait for the names themselves
        wait_for(
            lambda: all(path.exists() and path.read_text() for path in held),
            120,
            "the tests hold their databases",
        )
        names = [path.read_text() for path in held]
        assert sorted(_existing(names)) == sorted(names)
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:  # failed before its stop: stopped the same way, else killed
            stop_process(run, signal.SIGTERM, 60)
    assert "KeyboardInterrupt: signal 15" in output, output[-2000:]
    # a worker's DROP DATABASE may still be under way
    wait_for(lambda: not _existing(names), 10, f"the run's databases {names} to be dropped")
