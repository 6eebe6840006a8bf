"""Commands that run or inspect the queue side: `worker`, `relay`, `dlq list|replay`, `stats`.

Each needs a broker, so the library's default (none: no queue) is an error here, not a guess: a
worker quietly connecting to some local broker would hide a missing `--broker-url`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    cli,
    command,
    console,
    emit_json,
    errors,
    fail,
    settings_for,
)

if TYPE_CHECKING:
    from sessionledger.infrastructure.settings import Settings

dlq = typer.Typer(
    help="Inspect and replay the dead-letter queue.", no_args_is_help=True, rich_markup_mode=None
)
cli.add_typer(dlq, name="dlq")


def _queue_settings(database_url: str | None, broker_url: str | None) -> Settings:
    """The command's settings, which must name a broker (exit status 2 otherwise)."""
    settings = settings_for(database_url, broker_url)
    if settings.broker_url is None:
        fail("no broker: pass --broker-url or set SESSIONLEDGER_BROKER_URL (amqp://... or redis://...)")
    return settings


def _answering_broker(settings: Settings) -> str:
    """The settings' broker URL, once that broker took a connection (an operator asking about a
    broker that does not answer or refuses the login is told so, exit status 2)."""
    from sessionledger.workers.app import check_broker, required_broker

    broker_url = required_broker(settings)
    check_broker(broker_url)
    return broker_url


@command
def worker(
    role: Annotated[str, typer.Option("--role", help="all, ingest, tasks or relay.")] = "all",
    partitions: Annotated[str, typer.Option("--partitions", help="Ingest partitions, e.g. 0-3,6.")] = "all",
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Task worker processes.")] = None,
    loglevel: Annotated[str, typer.Option("--loglevel")] = "INFO",
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Run a Celery worker for the configured broker (all roles by default)."""
    settings = _queue_settings(database_url, broker_url)
    from sessionledger.workers.launch import ROLES, run_worker

    if role not in ROLES:
        fail(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    raise typer.Exit(
        run_worker(settings, role, partitions=partitions, concurrency=concurrency, loglevel=loglevel)
    )


@command
def relay(
    digest_every: Annotated[
        float | None,
        typer.Option(
            "--digest-every", min=0.001, help="Write a ledger digest every SECONDS (needs --digest-dir)."
        ),
    ] = None,
    digest_dir: Annotated[
        Path | None,
        typer.Option("--digest-dir", help="Where to write the digests: keep it off the database host."),
    ] = None,
    sign_key: Annotated[
        Path | None,
        typer.Option("--sign-key", help="Sign each digest with this Ed25519 private key (PEM; `keygen`)."),
    ] = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Tail the ledger and wake the evaluators (one per deployment; a second one waits as standby)."""
    settings = _queue_settings(database_url, broker_url)
    overrides = {
        name: value
        for name, value in (
            ("digest_every", digest_every),
            ("digest_dir", digest_dir),
            ("digest_sign_key", sign_key),
        )
        if value is not None
    }
    settings = settings.model_copy(update=overrides)
    if (settings.digest_every is None) != (settings.digest_dir is None):
        fail("--digest-every and --digest-dir go together")
    if settings.digest_dir is not None and not settings.digest_dir.is_dir():
        fail(f"--digest-dir {settings.digest_dir} is not a directory")
    if settings.digest_sign_key is not None:
        if settings.digest_every is None:
            fail("--sign-key signs the digests of --digest-every: give both")
        from sessionledger.infrastructure.audit.digest import InvalidDigest, load_private_key

        try:
            load_private_key(settings.digest_sign_key)
        except (InvalidDigest, OSError) as error:
            fail(f"--sign-key: {error}")
    from sessionledger.workers.launch import run_worker

    raise typer.Exit(run_worker(settings, "relay"))


@dlq.command("list")
def dlq_list(
    limit: Annotated[int, typer.Option("--limit", help="At most this many letters.")] = 100,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Show dead letters (oldest first) with the reason each was dead-lettered; they stay queued."""
    settings = _queue_settings(database_url, broker_url)
    broker = _answering_broker(settings)
    from sessionledger.workers.dlq import dead_queue_exists, list_dead

    if not dead_queue_exists(broker, settings.queue_names):
        _no_dead_queue(settings, [] if as_json else None)
        return
    letters = [letter.summary() for letter in list_dead(broker, settings.queue_names, limit)]
    if as_json:
        emit_json(letters)
        return
    from rich.table import Table

    table = Table("dead at", "queue", "task", "events", "sessions", "reason", title="dead letters")
    for letter in letters:
        table.add_row(
            str(letter["dead_at"]),  # with its zone, as every time the CLI prints
            str(letter["queue"]),
            str(letter["task"] or "-"),
            "-" if letter["events"] is None else str(letter["events"]),
            ", ".join(letter["sessions"] or [])[:60],
            str(letter["reason"]),
        )
    console.print(table)


def _no_dead_queue(settings: Settings, as_json: object | None) -> None:
    """Say that the broker holds no dead-letter queue (nothing was ever dead-lettered under that
    prefix, or the prefix is mistyped); it is not created to say so. With `--json`, `as_json`
    (the command's empty answer) goes to stdout and the note to stderr."""
    message = (
        f"no dead-letter queue {settings.queue_names.dead} on this broker: nothing was dead-lettered "
        f"under queue prefix {settings.queue_prefix!r} (is it the workers' SESSIONLEDGER_QUEUE_PREFIX?)"
    )
    if as_json is not None:
        emit_json(as_json)
    (console if as_json is None else errors).print(message, highlight=False, soft_wrap=True)


@dlq.command("replay")
def dlq_replay(
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many letters.")] = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Send dead letters back to their queues (each removed only once the broker confirmed it)."""
    settings = _queue_settings(database_url, broker_url)
    broker = _answering_broker(settings)
    from sessionledger.workers.dlq import dead_queue_exists, replay_dead

    if not dead_queue_exists(broker, settings.queue_names):
        _no_dead_queue(settings, {"replayed": 0} if as_json else None)
        return
    replayed = replay_dead(broker, settings.queue_names, limit)
    if as_json:
        emit_json({"replayed": replayed})
    else:
        console.print(f"replayed {replayed} dead letter(s)")


@command
def stats(
    prometheus: Annotated[bool, typer.Option("--prometheus", help="Prometheus text format.")] = False,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Counters (events ingested, compactions, conflicts, dead letters), queue depths, relay lag."""
    settings = _queue_settings(database_url, broker_url)
    _answering_broker(settings)
    from sessionledger.infrastructure.bootstrap import open_storage
    from sessionledger.workers.stats import collect_stats

    with open_storage(settings, create=False) as storage:
        collected = collect_stats(settings, storage)
    if prometheus:
        typer.echo(collected.prometheus(), nl=False)
        return
    if as_json:
        emit_json(collected.as_dict())
        return
    from rich.table import Table

    table = Table("metric", "value", title="sessionledger")
    for name, value in sorted(collected.counters.items()):
        table.add_row(name, f"{value:,}")
    for queue, depth in sorted(collected.queues.items()):
        if not collected.broker_answered:
            table.add_row(f"queue {queue}", "broker unreachable")
        else:
            table.add_row(f"queue {queue}", "does not exist" if depth is None else f"{depth:,}")
    table.add_row("relay lag (ledger rows)", f"{collected.relay_lag:,}")
    console.print(table)
    if collected.caveat is not None:
        console.print(f"caveat: {collected.caveat}", highlight=False, soft_wrap=True)
