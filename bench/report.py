"""The shared result table: one `Row` per figure, printed with rich and written as markdown.

Columns: benchmark, measured, baseline, ratio, target, pass. `measured` and `baseline` are already
formatted (units differ between rows); `ratio` is measured/baseline as the target states it;
`passed` is `None` for a figure reported without a target.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

RESULTS = Path(os.environ.get("SESSIONLEDGER_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
"""Where runs write their tables: bench/results (gitignored), or `SESSIONLEDGER_BENCH_RESULTS`."""
COLUMNS = ("benchmark", "measured", "baseline", "ratio", "target", "pass")


@dataclass(frozen=True, slots=True)
class Row:
    benchmark: str
    measured: str
    baseline: str = "-"
    ratio: float | None = None
    target: str = "-"
    passed: bool | None = None

    def cells(self) -> tuple[str, ...]:
        ratio = "-" if self.ratio is None else f"{self.ratio:.{'2f' if self.ratio >= 0.1 else '2g'}}"
        verdict = {None: "-", True: "yes", False: "NO"}[self.passed]
        return (self.benchmark, self.measured, self.baseline, ratio, self.target, verdict)


def rate(per_second: float, unit: str) -> str:
    """`2,950 events/s`."""
    return f"{per_second:,.0f} {unit}/s"


def duration(seconds: float) -> str:
    """Milliseconds below ten seconds (`1.84 ms`), else seconds."""
    return f"{seconds * 1000:.2f} ms" if seconds < 10 else f"{seconds:.1f} s"


def markdown(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def console() -> Console:
    """Wide enough for the table when the output is not a terminal (rich would wrap at 80)."""
    found = Console()
    return found if found.is_terminal else Console(width=160)


def show(rows: Sequence[Row], title: str, out: Console | None = None) -> None:
    table = Table(title=title)
    for name in COLUMNS:
        table.add_column(name, justify="left" if name in ("benchmark", "target") else "right")
    for row in rows:
        style = "red" if row.passed is False else None
        table.add_row(*row.cells(), style=style)
    (out or console()).print(table)


def write(text: str, name: str) -> Path:
    """Write `<name>` in `RESULTS`."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / name
    path.write_text(text, encoding="utf-8")
    return path


def main(run: Callable[[], list[Row]]) -> None:
    """Entry point of a benchmark module run alone (`python -m bench.<module>`): table,
    `results/<module>.md`, exit status 1 when a target is missed."""
    name = Path(sys.argv[0]).stem
    rows = run()
    show(rows, name)
    path = write(f"## {name}\n\n{markdown(rows)}", f"{name}.md")
    print(f"written to {path}")
    sys.exit(1 if any(row.passed is False for row in rows) else 0)
