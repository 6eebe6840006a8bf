"""The command line's start-up: seconds of imports before each command runs (issue 24).

Each case is a fresh interpreter run with `-X importtime`; its figure is the sum of the top-level
imports' cumulative times (what the interpreter itself imports at start included), so the figure
is the one the issue's targets name. Against, in the same run:
- `--version` and `--help` (target: under 0.15 s): `python -c "import typer"`, the one library a
  typer command cannot start without;
- `sessions` and `events` on a small SQLite ledger (target: under 0.5 s): `python -c "import
  typer, rich.table, sqlalchemy, pydantic_settings"`, the libraries a command reading the ledger
  cannot do without (the ledger's engine, the settings, the table), so the ratio is what the
  command adds to its floor;
- the bare interpreter (`python -c pass`) is reported too, as what every figure includes.
Every run reads its bytecode from one cache made for the benchmark (`PYTHONPYCACHEPREFIX`, written
by a first, unmeasured round, removed at the end), as an installed package has its bytecode: no
case pays for compiling a module, even where the environment says not to write bytecode. Cases
alternate round by round; figures are medians.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import open_service

from bench import report
from bench.report import Row
from bench.timing import alternating

ROUNDS = 7
_TOP_LEVEL = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| {1}(?! )")
_FLOORS = {
    "interpreter": "pass",
    "typer": "import typer",
    "reading floor": "import typer, rich.table, sqlalchemy, pydantic_settings",
}
_COMMANDS = {"--version": 0.15, "--help": 0.15, "sessions": 0.5, "events": 0.5}
"""Each command and its target, in seconds of imports."""
_SCRIPT = Path(sys.executable).with_name("sessionledger")
_PROGRAM = [str(_SCRIPT)] if _SCRIPT.is_file() else ["-m", "sessionledger"]
"""The installed console script, run by this interpreter as its shebang would (else `-m`)."""


def import_seconds(args: list[str], bytecode: Path) -> float:
    """Seconds of imports of one interpreter run with `args` (which must exit with status 0),
    its bytecode read from (and written to) the folder `bytecode`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SESSIONLEDGER_", "OPENAI_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPYCACHEPREFIX"] = str(bytecode)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args} failed: {done.stderr[-2000:]}")
    return sum(int(found) for found in _TOP_LEVEL.findall(done.stderr)) / 1e6


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as folder:
        url = f"sqlite:///{Path(folder) / 'ledger.db'}"
        with open_service(url) as service:
            session_id = service.create_session("alice", app_name="bench").id
            for turn in range(20):
                service.append_message(session_id, UserMessage(f"question {turn}"))
                service.append_message(session_id, AssistantMessage(text=f"answer {turn}"))
        database = ["--database-url", url]
        arguments = {
            "--version": ["--version"],
            "--help": ["--help"],
            "sessions": ["sessions", "--user", "alice", *database],
            "events": ["events", session_id, *database],
        }
        bytecode = Path(folder) / "bytecode"
        cases = {
            name: (lambda code=code: import_seconds(["-c", code], bytecode)) for name, code in _FLOORS.items()
        }
        cases |= {
            name: (lambda args=args: import_seconds([*_PROGRAM, *args], bytecode))
            for name, args in arguments.items()
        }
        alternating(1, cases)  # writes the bytecode
        medians = alternating(ROUNDS, cases)
    rows = [Row("interpreter start (python -c pass)", f"{medians['interpreter']:.3f} s of imports")]
    for name, target in _COMMANDS.items():
        floor = "typer" if target < 0.5 else "reading floor"
        rows.append(
            Row(
                f"sessionledger {name}",
                f"{medians[name]:.3f} s of imports",
                f"{floor} {medians[floor]:.3f} s",
                medians[name] / medians[floor],
                f"< {target} s of imports",
                medians[name] < target,
            )
        )
    return rows


if __name__ == "__main__":
    report.main(run)
