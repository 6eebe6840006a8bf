"""`python -m bench [MODULE ...]`: the benchmarks of this package (all by default), a table each.

A whole run is also written to results/latest.md, a module chosen by name to results/<module>.md.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import traceback

import bench
from bench.report import Row, console, markdown, show, write


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))


def arguments(argv: list[str] | None) -> list[str]:
    """The modules to run, from the command line; `--help` and mistakes end the process (argparse)."""
    available = modules()
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "Runs the benchmarks on the local PostgreSQL (SESSIONLEDGER_BENCH_PG, an admin URL: each "
            "module creates and drops a database of its own) and RabbitMQ (SESSIONLEDGER_BENCH_BROKER), "
            "and prints each figure as a ratio against a baseline measured in the same run. Exit "
            "status 1 when a target is missed."
        ),
    )
    parser.add_argument(
        "modules", nargs="*", metavar="MODULE", help=f"run only these: {', '.join(available)} (default: all)"
    )
    chosen: list[str] = parser.parse_args(argv).modules
    unknown = [name for name in chosen if name not in available]
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)}; there are {', '.join(available)}")
    return chosen or available


def main(argv: list[str] | None = None) -> int:
    chosen = arguments(argv)
    out = console()
    sections: dict[str, str] = {}
    failed = False
    for name in chosen:
        started = time.monotonic()
        out.rule(name)
        try:
            rows: list[Row] = importlib.import_module(f"bench.{name}").run()
        except Exception:
            out.print(traceback.format_exc(), style="red", markup=False)
            sections[name] = f"## {name}\n\nfailed: see the console output\n"
            failed = True
            continue
        elapsed = time.monotonic() - started
        show(rows, f"{name} ({elapsed:.0f} s)", out)
        sections[name] = f"## {name}\n\n{markdown(rows)}"
        failed |= any(row.passed is False for row in rows)
    if chosen == modules():
        out.print(f"written to {write(chr(10).join(sections.values()), 'latest.md')}")
    else:
        for name, section in sections.items():
            out.print(f"written to {write(section, f'{name}.md')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
