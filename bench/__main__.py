"""`python -m bench`: every `bench_*` module of this package, one table each, and results/latest.md."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback

import bench
from bench.report import Row, console, markdown, show, write


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))


def main() -> int:
    out = console()
    sections: list[str] = []
    failed = False
    for name in modules():
        started = time.monotonic()
        out.rule(name)
        try:
            rows: list[Row] = importlib.import_module(f"bench.{name}").run()
        except Exception:
            out.print(traceback.format_exc(), style="red", markup=False)
            sections.append(f"## {name}\n\nfailed: see the console output\n")
            failed = True
            continue
        elapsed = time.monotonic() - started
        show(rows, f"{name} ({elapsed:.0f} s)", out)
        sections.append(f"## {name}\n\n{markdown(rows)}")
        failed |= any(row.passed is False for row in rows)
    path = write("\n".join(sections), "latest.md")
    out.print(f"written to {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
