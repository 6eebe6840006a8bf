"""The `sessionledger` command: one typer application, commands grouped by what they serve."""

from __future__ import annotations

import sys
from importlib import import_module

from sessionledger.workers.cli.app import cli

MODULES = ("audit", "browse", "demo", "digests", "fake_llm", "mcp", "migrate", "queue", "serve", "tokens")
"""The modules whose commands make up the application (importing one registers its commands)."""
HOMES = {
    **dict.fromkeys(("sessions", "events"), "browse"),
    **dict.fromkeys(("digest", "prove", "keygen", "check-proof"), "digests"),
    **dict.fromkeys(("replay", "verify", "export", "import", "timeline"), "audit"),
    "demo": "demo",
    "fake-llm": "fake_llm",
    "mcp": "mcp",
    "migrate": "migrate",
    "serve": "serve",
    "token": "tokens",
    **dict.fromkeys(("worker", "relay", "stats", "dlq"), "queue"),
}
"""The module of each command, so that running one imports its module only (the others cost a
reading command's start-up a few hundredths of a second); `--version`, `--help`, no command or
a name that is none imports them all."""


def main() -> None:
    """Console-script entry point: run the command, mapping errors to the contract's exit codes."""
    home = HOMES.get(sys.argv[1]) if len(sys.argv) > 1 else None
    for module in MODULES if home is None else (home,):
        import_module(f"{__name__}.{module}")
    sys.exit(cli(standalone_mode=True))
