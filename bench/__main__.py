"""`python -m bench [MODULE ...]`: the benchmarks of this package (all by default), a table each;
`python -m bench --peers`: sessionledger side by side with the peer session stores (`bench_peers`,
which needs the `bench` extra and is therefore not part of the default run).

A whole run is also written to results/latest.md, a module chosen by name to results/<module>.md,
the comparison with the peers to results/peers.md.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import traceback

from rich.console import Console

import bench
from bench.report import Row, console, markdown, show, write

PEERS = "bench_peers"
"""The comparison with the peers: run by `--peers` only (it needs the optional `bench` extra)."""


def modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(bench.__path__)
        if m.name.startswith("bench_") and m.name != PEERS
    )


def arguments(argv: list[str] | None) -> tuple[list[str], bool]:
    """The modules to run and whether to compare with the peers, from the command line; `--help`
    and mistakes end the process (argparse)."""
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
    parser.add_argument(
        "--peers",
        action="store_true",
        help="instead (or besides the modules named): sessionledger side by side with google-adk, "
        "openai-agents and langchain-postgres on the same database (pip install -e '.[bench]')",
    )
    parsed = parser.parse_args(argv)
    chosen: list[str] = parsed.modules
    unknown = [name for name in chosen if name not in available]
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)}; there are {', '.join(available)}")
    return (chosen or ([] if parsed.peers else available)), parsed.peers


def main(argv: list[str] | None = None) -> int:
    chosen, peers = arguments(argv)
    out = console()
    sections: dict[str, str] = {}
    failed = peers and not compare_with_peers(out)
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


def compare_with_peers(out: Console) -> bool:
    """Run `bench_peers`, print its side-by-side table and its targets, write results/peers.md;
    whether every target was met."""
    from bench import bench_peers  # imports the peers' packages only when asked for

    out.rule("peers")
    started = time.monotonic()
    figures = bench_peers.measure()
    table = bench_peers.side_by_side(figures)
    found = bench_peers.rows(figures)
    out.print(table, markup=False)
    show(found, f"peers ({time.monotonic() - started:.0f} s)", out)
    out.print(f"written to {write(f'## peers{chr(10) * 2}{table}{chr(10)}{markdown(found)}', 'peers.md')}")
    return not any(row.passed is False for row in found)


if __name__ == "__main__":
    sys.exit(main())
