"""`python -m bench`: help without a run, one module by name, and an interrupted run that leaves no
database behind (bench/__main__.py, bench/database.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import PG_ADMIN_URL

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
PREFIX = f"sl_bench_test_{uuid.uuid4().hex[:8]}"
"""This test's benchmark runs name their databases with it, so it never touches another run's."""


def bench_databases() -> set[str]:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", [f"{PREFIX}_"]
        ).fetchall()
    return {name for (name,) in rows}


def drop(names: set[str]) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def bench(*arguments: str, env_extra: dict[str, str] | None = None, **options) -> subprocess.Popen:
    env = {
        **os.environ,
        "SESSIONLEDGER_BENCH_PG": PG_ADMIN_URL,
        "SESSIONLEDGER_BENCH_DB_PREFIX": PREFIX,
        **(env_extra or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "bench", *arguments],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
        **options,
    )


def _ctrl_c_as_in_a_terminal() -> None:
    """In the benchmark's process, before it starts: SIGINT at its default, as for a command run in
    a terminal. A test run started in the background by a shell without job control (`(make test &)`)
    ignores SIGINT, its children inherit that, and Python then installs no KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """The benchmark processes a test starts: never left running, nor their databases."""
    before = bench_databases()
    processes: list[subprocess.Popen] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()
    drop(bench_databases() - before)


def test_help_prints_usage_and_runs_nothing(started) -> None:
    before = bench_databases()
    started.append(process := bench("--help"))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.startswith("usage: python -m bench") and "bench_ledger" in out and "bench_queue" in out
    assert "--peers" in out and "bench_peers" not in out  # the peers run only when asked for
    assert bench_databases() == before


def test_an_unknown_module_is_a_usage_error(started) -> None:
    started.append(process := bench("bench_nothing"))
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "no benchmark named bench_nothing; there are " in err and "bench_audit" in err


@pytest.mark.slow
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_benchmark_drops_its_database(started, number) -> None:
    before = bench_databases()
    started.append(process := bench("bench_ledger"))
    deadline = time.monotonic() + 120
    while not (created := bench_databases() - before):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the benchmark never created its database"
        time.sleep(0.2)
    time.sleep(2)  # well into the run: the service open, appends under way
    assert process.poll() is None
    process.send_signal(number)
    process.communicate(timeout=120)
    assert process.returncode != 0
    assert bench_databases() & created == set()


def test_a_module_by_name_runs_and_drops_its_databases(started, tmp_path) -> None:
    """bench_scale, on a small ledger: its four databases made and dropped, its rows printed and
    written where it was told."""
    before = bench_databases()
    told = {"SESSIONLEDGER_BENCH_SCALE_EVENTS": "3000", "SESSIONLEDGER_BENCH_RESULTS": str(tmp_path)}
    started.append(process := bench("bench_scale", env_extra=told))
    out, err = process.communicate(timeout=300)
    assert process.returncode in (0, 1), err  # 1: a target missed on a noisy machine, still a run
    assert out.count("on an empty ledger") == 12 and out.count("3,000-event") == 12  # its twelve rows
    written = (tmp_path / "bench_scale.md").read_text()
    assert "append_message to a small session, on a 3,000-event partitioned ledger" in written
    assert bench_databases() == before
