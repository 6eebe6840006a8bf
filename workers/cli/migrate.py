"""`sessionledger migrate`: the schema step that reading commands leave to the operator.

Writing commands and workers create or upgrade the schema when they open a ledger (and a vector
store its table when it opens); reading commands never change a database, so an older ledger is
upgraded here, on purpose, and the vector table with it. A PostgreSQL without pgvector gets the
ledger and a line saying why it has no vector table.
"""

from __future__ import annotations

from typing import Annotated

import typer
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    command,
    console,
    emit_json,
    settings_for,
)

Partitions = Annotated[
    int | None,
    typer.Option(
        "--partitions",
        help="hash-partition the session-keyed tables by session id into this many (PostgreSQL; "
        "an existing ledger is converted in place: docs/scaling.md)",
        show_default=False,
    ),
]


@command
def migrate(
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    partitions: Partitions = None,
    as_json: AsJson = False,
) -> None:
    """Create the ledger's schema and the vector table, or upgrade them to this version's revisions."""
    from sessionledger.infrastructure.bootstrap import migrate_storage

    settings = settings_for(database_url, broker_url)
    migrated = migrate_storage(settings, partitions=partitions)
    url, revision, vectors = (
        hide_passwords(settings.database_url),
        migrated.revision,
        migrated.vectors_revision,
    )
    if as_json:
        emit_json(
            {
                "database_url": url,
                "revision": revision,
                "vectors_revision": vectors,
                "partitions": migrated.partitions,
            }
        )
        return
    console.print(f"the ledger at {url} is at schema revision {revision}", highlight=False, soft_wrap=True)
    if migrated.partitions_before != migrated.partitions:
        console.print(
            f"its session-keyed tables went from {migrated.partitions_before or 'no'} to "
            f"{migrated.partitions} hash partitions by session id",
            highlight=False,
            soft_wrap=True,
        )
    elif migrated.partitions:
        console.print(
            f"its session-keyed tables have {migrated.partitions} hash partitions by session id",
            highlight=False,
            soft_wrap=True,
        )
    if vectors is not None:
        console.print(f"its vector table is at revision {vectors}", highlight=False, soft_wrap=True)
    elif migrated.vectors_missing:
        console.print(f"no vector table: {migrated.vectors_missing}", highlight=False, soft_wrap=True)
