"""The typer application and the options every command shares (CONTRACT.md section 5)."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from sessionledger.infrastructure import SessionService, open_service
from sessionledger.infrastructure.settings import Settings

from sessionledger import __version__

cli = typer.Typer(
    name="sessionledger",
    help="Event-sourced session ledger for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="SESSIONLEDGER_DATABASE_URL",
        help="sqlite:///..., postgresql+psycopg://... or memory://; default: the embedded SQLite file.",
    ),
]
BrokerUrl = Annotated[
    str | None,
    typer.Option("--broker-url", envvar="SESSIONLEDGER_BROKER_URL", help="amqp://... or redis://..."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]

console = Console()
errors = Console(stderr=True)


def _print_version(asked: bool) -> None:
    if asked:
        console.print(f"sessionledger {__version__}", markup=False, highlight=False)
        raise typer.Exit()


@cli.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Event-sourced session ledger for LLM agents."""


class CheckFailed(Exception):
    """A check found a problem: exit status 1 (bad arguments are 2)."""


def fail(message: str, status: int = 2) -> NoReturn:
    """One line on stderr, then exit: 2 for bad arguments, 1 for a failed check."""
    errors.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(status)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


@contextmanager
def service_for(database_url: str | None, broker_url: str | None = None) -> Iterator[SessionService]:
    """Open the ledger for one command; bad URLs and bad arguments become exit status 2.

    These commands read whole sessions at once, hundreds of thousands of acyclic objects that
    the cyclic garbage collector would rescan again and again as they pile up (more than half of
    a 100,000-event `verify`), so it is paused while the command runs; reference counting still
    frees everything as it goes.
    """
    url = database_url or Settings().database_url
    try:
        service = open_service(url, broker_url=broker_url)
    except (ValueError, ImportError) as error:
        fail(f"cannot open {url}: {error}")
    with service, _collector_paused():
        try:
            yield service
        except ValueError as error:
            fail(str(error))


@contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def command(function: Callable[..., Any]) -> Callable[..., Any]:
    """Register a command on the application (kept as a function so modules read top-down)."""
    return cli.command()(function)
