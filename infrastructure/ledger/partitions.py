"""Hash partitioning of a PostgreSQL ledger by session id (`sessionledger migrate --partitions N`).

The session-keyed tables (`sessions`, `ledger`, `window_slots`) become `PARTITION BY HASH` on
their session id column, the column Citus would distribute them on (docs/scaling.md), so every
session-scoped statement touches one partition of each. An existing ledger is converted in one
transaction: each table is copied into a partitioned twin, which then takes its place, its
constraints, indexes and the append-only guard made again under their own names. Nothing else
changes (no row, hash or global position), so `verify` passes before and after. Converting to
another number of partitions is the same procedure; the tables are locked while it runs (writers
wait, readers of those tables too), for a time proportional to the ledger's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.migrate import ADVISORY_LOCK_KEY

__all__ = ["MAX_PARTITIONS", "Table", "check_partitions", "partition_count", "partition_ledger"]

MAX_PARTITIONS = 1024
"""More partitions than this only cost planning time: past one machine, shard (Citus) instead."""


@dataclass(frozen=True)
class Table:
    """A session-keyed table: its partition key, and the constraints and indexes it is made with."""

    name: str
    key: str
    constraints: tuple[str, ...]
    indexes: tuple[str, ...] = ()


TABLES = (
    Table(
        "sessions",
        "id",
        ("CONSTRAINT sessions_pkey PRIMARY KEY (id)",),
        (
            "CREATE INDEX ix_sessions_user ON sessions (user_id, app_name, created_at)",
            "CREATE INDEX ix_sessions_expires_at ON sessions (expires_at)",
        ),
    ),
    Table(
        "ledger",
        "session_id",
        (
            # a partitioned table's keys include its partition key: global positions stay unique
            # by their identity sequence, and the relay's tail reads them through an index of its own
            "CONSTRAINT ledger_pkey PRIMARY KEY (session_id, global_position)",
            "CONSTRAINT uq_ledger_session_position UNIQUE (session_id, position)",
        ),
        (
            "CREATE INDEX ix_ledger_global_position ON ledger (global_position)",
            # partial, as on an unpartitioned ledger (migration 0005): only events carry an id
            "CREATE UNIQUE INDEX uq_ledger_session_event ON ledger (session_id, event_id) "
            "WHERE event_id IS NOT NULL",
        ),
    ),
    Table("window_slots", "session_id", ("CONSTRAINT window_slots_pkey PRIMARY KEY (session_id, position)",)),
)

_GUARD = (
    "CREATE TRIGGER ledger_guard BEFORE UPDATE OR DELETE ON ledger "
    "FOR EACH ROW EXECUTE FUNCTION ledger_guard()"
)
_TRUNCATE_GUARD = (
    "CREATE TRIGGER ledger_guard_truncate BEFORE TRUNCATE ON {table} "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_guard()"
)


def partition_count(connection: sa.Connection) -> int:
    """How many hash partitions the ledger table has (0: it is not partitioned)."""
    return int(
        connection.execute(
            sa.text(
                "SELECT count(i.inhrelid) FROM pg_class c "
                "LEFT JOIN pg_inherits i ON i.inhparent = c.oid "
                "WHERE c.relname = 'ledger' AND c.relnamespace = current_schema()::regnamespace"
            )
        ).scalar_one()
    )


def partition_name(table: str, partitions: int, remainder: int) -> str:
    """`ledger_h8_3`: the partition count in the name, so that a conversion to another count never
    meets the names of the partitions it replaces."""
    return f"{table}_h{partitions}_{remainder}"


def check_partitions(partitions: int) -> None:
    """`ValueError` for a partition count out of range (checked before anything is opened)."""
    if not 2 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"--partitions must be between 2 and {MAX_PARTITIONS}, not {partitions}")


def partition_ledger(engine: sa.Engine, partitions: int) -> tuple[int, int]:
    """Hash-partition the ledger's session-keyed tables into `partitions`; the partition counts
    before and after (the same: nothing to do). `ValueError` for a count out of range or a
    ledger that is not on PostgreSQL. The schema must be at head (`migrate` brings it there first).
    """
    if engine.dialect.name != "postgresql":
        raise ValueError("only a PostgreSQL ledger can be partitioned (SQLite has no partitions)")
    check_partitions(partitions)
    with engine.begin() as connection:
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
        before = partition_count(connection)
        if before == partitions:
            return before, before
        names = ", ".join(table.name for table in TABLES)
        connection.execute(sa.text(f"LOCK TABLE {names} IN ACCESS EXCLUSIVE MODE"))
        for table in TABLES:
            _convert(connection, table, partitions)
        return before, partition_count(connection)


def _convert(connection: sa.Connection, table: Table, partitions: int) -> None:
    """Copy `table` into a partitioned twin that takes its name, keys, indexes and guards."""
    run = connection.exec_driver_sql
    twin = f"{table.name}__partitioned"
    run(
        f"CREATE TABLE {twin} (LIKE {table.name} INCLUDING DEFAULTS INCLUDING IDENTITY "
        f"INCLUDING COMPRESSION INCLUDING STORAGE) PARTITION BY HASH ({table.key})"
    )
    for remainder in range(partitions):
        run(
            f"CREATE TABLE {partition_name(table.name, partitions, remainder)} PARTITION OF {twin} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )
    run(f"INSERT INTO {twin} OVERRIDING SYSTEM VALUE SELECT * FROM {table.name}")
    run(f"DROP TABLE {table.name}")
    run(f"ALTER TABLE {twin} RENAME TO {table.name}")
    for constraint in table.constraints:
        run(f"ALTER TABLE {table.name} ADD {constraint}")
    for index in table.indexes:
        run(index)
    if table.name == "ledger":
        run(
            "SELECT setval(pg_get_serial_sequence('ledger', 'global_position'), "
            "coalesce(max(global_position), 0) + 1, false) FROM ledger"
        )
        run(_GUARD)
        # TRUNCATE triggers are not inherited: the parent and every partition get one
        for name in ("ledger", *(partition_name("ledger", partitions, r) for r in range(partitions))):
            run(_TRUNCATE_GUARD.format(table=name))
