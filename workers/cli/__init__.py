"""The `sessionledger` command: one typer application, commands grouped by what they serve."""

from __future__ import annotations

import sys

from sessionledger.workers.cli.app import cli


def main() -> None:
    """Console-script entry point: run the command, mapping errors to the contract's exit codes."""
    from sessionledger.workers.cli import audit, browse, demo, digests, fake_llm, migrate, queue  # noqa: F401  (registers their commands)

    sys.exit(cli(standalone_mode=True))
