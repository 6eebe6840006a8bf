"""The typer application and the options every command shares (docs/api.md "Command line")."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from sessionledger.infrastructure.redaction import hide_passwords
from typer.core import TyperGroup

from sessionledger import __version__

if TYPE_CHECKING:
    import socket

    from rich.console import Console
    from sessionledger.infrastructure import SessionService
    from sessionledger.infrastructure.bootstrap import Storage
    from sessionledger.infrastructure.settings import Settings

_command_settings: ContextVar[Settings | None] = ContextVar("command_settings", default=None)
"""The running command's settings (`settings_for`), so that a failure names the database or broker."""


class _Commands(TyperGroup):
    """Every command, each run so that an operator's mistake (bad settings or arguments, no ledger,
    a database or broker that refuses or does not answer) is one line on stderr and exit status 2."""

    def invoke(self, ctx: Any) -> Any:  # the Context of the click that typer bundles
        started = _command_settings.set(None)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # the command's own exit, or typer's usage error: nothing to translate
        except Exception as error:
            from sessionledger.workers.failures import operator_message

            message = operator_message(error, _command_settings.get())
            if message is None:
                raise
            fail(message)
        finally:
            _command_settings.reset(started)


cli = typer.Typer(
    name="sessionledger",
    cls=_Commands,
    help="Event-sourced session ledger for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich's help formatter would double `--help`'s start-up
)

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="sqlite:///..., postgresql+psycopg://... or memory://; default: SESSIONLEDGER_DATABASE_URL, "
        "else the embedded SQLite file ./sessionledger.db.",
    ),
]
BrokerUrl = Annotated[
    str | None,
    typer.Option(
        "--broker-url", help="amqp://... or redis://...; default: SESSIONLEDGER_BROKER_URL, else none."
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
OnBehalfOf = Annotated[
    str | None,
    typer.Option("--user", help="Act for this user: another user's session is as unknown as a missing one."),
]


VISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}
"""Control characters, each as its escape (`\\x1b`), for `str.translate`: stored text (a chat
message, an id an API took) may hold an escape sequence, which would clear, restyle or hide what
the operator's terminal shows."""


def _literal_console(stderr: bool) -> Console:
    """A console that prints every string as it is: markup off, since stored text such as `[/INST]`
    or `[black on black]` is no tag (print with `markup=True`, or a styled `Text`, to style), and
    control characters shown (`VISIBLE`), in cells and titles as in lines."""
    from rich.console import Console
    from rich.text import Text

    class LiteralConsole(Console):
        def render_str(self, text: str, **options: Any) -> Text:
            return super().render_str(text.translate(VISIBLE), **options)

    return LiteralConsole(stderr=stderr, markup=False)


class _LazyConsole:
    """A rich `Console` made on first use: rich costs as much to import as typer, and `--version`,
    `--help` and every command that prints no table have no use for it."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def _made(self) -> Console:
        if self._console is None:
            self._console = _literal_console(self._stderr)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    # what rich itself does to a console it is given (a `Progress` enters it): special methods
    # are looked up on the type, never through `__getattr__`
    def __enter__(self) -> Console:
        return self._made().__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        self._made().__exit__(*exc_info)


console: Console = _LazyConsole()  # type: ignore[assignment]  # a Console to every caller
errors: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]  # likewise


def _print_version(asked: bool) -> None:
    if asked:
        sys.stdout.write(f"sessionledger {__version__}\n")
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
    """One line on stderr (passwords masked), then exit: 2 for bad arguments, 1 for a failed check."""
    errors.print(f"error: {hide_passwords(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(status)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on `host:port`, or one line and exit 2: a server binds it before it
    says it serves, so a port in use or an address not this machine's is said plainly (uvicorn
    logged it after the banner, and exited 3)."""
    import os
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except socket.gaierror as error:
        fail(f"cannot listen on {host}:{port}: {error.strerror}")
    except OSError as error:  # create_server's own message adds the address again
        fail(f"cannot listen on {host}:{port}: {os.strerror(error.errno) if error.errno else error}")


def reason(error: Exception) -> str:
    """What `error` says: `str()` of a `KeyError` is the repr of its message, quotes and all."""
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def unknown_session(service: SessionService, session_id: str, user: str | None = None) -> NoReturn:
    """Fail for a session the ledger does not have (for `user`): every command taking a session
    says it here, pointing to the `app/user/id` name when `session_id` is the id of an ADK session
    (google-adk's id is only the last part of the ledger's), with `user` only to one of theirs."""
    from sessionledger.infrastructure.adk.ids import adk_key

    for ledger_id in () if "/" in session_id else service.ledger.session_ids():
        key = adk_key(ledger_id)
        if key is not None and key[2] == session_id and user in (None, key[1]):
            fail(f"unknown session {session_id!r}: an ADK session is named app/user/id, e.g. {ledger_id!r}")
    fail(f"unknown session {session_id!r}")  # the same whoever asks: another user's is as unknown


def shown_time(moment: datetime, *, minutes: bool = False) -> str:
    """A time as the tables print it: ISO-8601 in UTC to the microsecond (or the minute), with its
    zone (`Z`), so that what a table shows is what `--at` takes."""
    from sessionledger.domain.codec import format_timestamp

    text = format_timestamp(moment)
    return (text[:16] if minutes else text.removesuffix("+00:00")) + "Z"


TIME_WIDTH = len("2026-01-31T12:00:00.123456Z")


def time_column(header: str) -> Any:
    """A table column for `shown_time`s: never cut short or folded, whatever the terminal's width
    (an 80-column one cut the zone off), since `--at` takes a printed time back whole."""
    from rich.table import Column

    return Column(header, no_wrap=True, min_width=TIME_WIDTH)


def json_text(data: Any) -> str:
    """What `--json` prints (and the MCP server's resources hold)."""
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


def emit_json(data: Any) -> None:
    sys.stdout.write(json_text(data) + "\n")


def settings_for(database_url: str | None, broker_url: str | None = None) -> Settings:
    """The command's settings: its options over the environment (invalid ones are exit status 2)."""
    from sessionledger.infrastructure.settings import Settings

    overrides: dict[str, Any] = {"database_url": database_url, "broker_url": broker_url}
    settings = Settings(**{name: value for name, value in overrides.items() if value is not None})
    _command_settings.set(settings)
    return settings


@contextmanager
def service_for(
    database_url: str | None, broker_url: str | None = None, *, create: bool = False
) -> Iterator[SessionService]:
    """Open the ledger for one command: read-only unless it `create`s (or migrates) one, so that a
    reading command run in the wrong place says there is no ledger instead of making an empty one.

    These commands read whole sessions at once, hundreds of thousands of acyclic objects that
    the cyclic garbage collector would rescan again and again as they pile up (more than half of
    a 100,000-event `verify`), so it is paused while the command runs; reference counting still
    frees everything as it goes.
    """
    with storage_for(database_url, broker_url, create=create) as storage:
        yield storage.service


@contextmanager
def storage_for(
    database_url: str | None, broker_url: str | None = None, *, create: bool = False
) -> Iterator[Storage]:
    """`service_for`, with the stores beside the ledger (the tokens, the workers' stores)."""
    from sessionledger.infrastructure.bootstrap import open_storage

    with open_storage(settings_for(database_url, broker_url), create=create) as storage, _collector_paused():
        yield storage


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
