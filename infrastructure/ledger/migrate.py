"""Creates or upgrades a schema on open, safely when several processes open at once.

Two schemas share this runner, each an Alembic history with its own version table: the ledger's
(`migrations/`, run whenever a ledger is opened to write) and the vector stores' (`migrations/vectors/`,
run when a vector store is opened, and by `sessionledger migrate`). They are apart so that the
ledger never waits for, or fails on, an extension that only the vectors need, and a vector store
in a file of its own gets no ledger tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.engine import WRITE

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import MetaData

MIGRATIONS = Path(__file__).with_name("migrations")
ADVISORY_LOCK_KEY = 0x5E551071ED6E
"""pg_advisory_lock key serializing schema upgrades (of either schema) across processes."""
LOCK_NAME = "sessionledger.migrate"
"""The same, as MariaDB's and MySQL's named lock (`GET_LOCK`)."""
HEAD_REVISION = "0008"
"""The newest ledger migration's revision, written here so that opening a ledger that is up to date
(every reading command, every writer after the first) needs no alembic, whose import costs more
than all the rest of a command's; tests/integration/test_migrations.py holds it equal to alembic's
head (and VECTORS_HEAD_REVISION to the vectors' head)."""
VECTORS_HEAD_REVISION = "vectors_0002"
"""The vector table's newest revision (its own history, `migrations/vectors/versions/`); the ledger's
revision does not move with it, so a reader of a ledger never depends on the vectors."""


@dataclass(frozen=True, slots=True)
class Schema:
    """One migration history: its Alembic directory (env.py, versions/), the table that records
    its revision, and its head."""

    location: Path
    version_table: str
    head: str


LEDGER = Schema(MIGRATIONS, "alembic_version", HEAD_REVISION)
VECTORS = Schema(MIGRATIONS / "vectors", "vectors_alembic_version", VECTORS_HEAD_REVISION)


def _config(schema: Schema = LEDGER) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(schema.location))
    config.attributes["version_table"] = schema.version_table
    return config


def run_environment(metadata: MetaData | None) -> None:
    """Both histories' env.py: run on the connection the runner holds (and locked), recording the
    revision in the history's own table; never from the alembic command line with a URL."""
    from alembic import context

    context.configure(
        connection=context.config.attributes["connection"],
        target_metadata=metadata,
        render_as_batch=True,
        version_table=context.config.attributes["version_table"],
    )
    with context.begin_transaction():
        context.run_migrations()


def head_revision(schema: Schema = LEDGER) -> str:
    return schema.head


def current_revision(connection: sa.Connection, schema: Schema = LEDGER) -> str | None:
    """The revision `schema` is at; `None` where the database has no table recording one. One
    query where it has one: asking the catalog first compiled SQLAlchemy's reflection query again
    for every new engine, 4 of the 16 ms a ledger opened per request took to open. A failed query
    ends the connection's transaction (PostgreSQL aborts it), so it is rolled back first; any
    error is asked about, as an engine over a connection of another driver's (sqlite-vec's store)
    raises that driver's own errors, which SQLAlchemy does not wrap.

    A table found after its query failed was made meanwhile by another opener's upgrade (MariaDB
    and MySQL commit each DDL statement at once, so it shows before that upgrade ends): it is read
    again, and an error that was not the table's absence comes back from that second read."""
    query = sa.text(f"SELECT version_num FROM {schema.version_table}")
    try:
        return connection.execute(query).scalar()
    except Exception:
        connection.rollback()
        if not sa.inspect(connection).has_table(schema.version_table):
            return None
    return connection.execute(query).scalar()


def upgrade(engine: sa.Engine, schema: Schema = LEDGER) -> None:
    """Bring `schema` to its head revision; a no-op (one query) when it is there already.

    PostgreSQL: the upgrade runs in one transaction under a session advisory lock. SQLite: in one
    BEGIN IMMEDIATE transaction, which is the database's write lock. MariaDB/MySQL: under a named
    lock (`GET_LOCK`). Every way a second opener waits, then finds the schema current. A revision
    that raises leaves the schema as it was on PostgreSQL and SQLite; MariaDB and MySQL commit each
    DDL statement on its own, so there it stops where it failed (its revision not recorded).
    """
    with engine.connect() as connection:
        if current_revision(connection, schema) == schema.head:
            return
    if engine.dialect.name == "sqlite":
        with engine.execution_options(**{WRITE: True}).begin() as connection:
            _upgrade_on(connection, schema)
        return
    with engine.connect() as connection:
        _lock_schema(connection)
        try:
            _upgrade_on(connection, schema)
            connection.commit()
        finally:
            connection.rollback()
            connection.execute(
                sa.text("SELECT RELEASE_LOCK(:key)").bindparams(key=LOCK_NAME)
                if engine.dialect.name == "mysql"
                else sa.select(sa.func.pg_advisory_unlock(ADVISORY_LOCK_KEY))
            )
            connection.commit()


def _lock_schema(connection: sa.Connection) -> None:
    """Wait for the schema's lock on `connection`, however long: a schema change is no request, so
    neither it nor the wait for another process's may time out. PostgreSQL: its session advisory
    lock, the statement timeout off for the transaction. MariaDB/MySQL: the named lock, asked for a
    second at a time (each wait well within the statement timeout, which is a session setting there)."""
    if connection.dialect.name == "mysql":
        take = sa.text("SELECT GET_LOCK(:key, 1)").bindparams(key=LOCK_NAME)
        while connection.execute(take).scalar() != 1:
            pass
        return
    connection.execute(sa.text("SET LOCAL statement_timeout = 0"))
    connection.execute(sa.select(sa.func.pg_advisory_lock(ADVISORY_LOCK_KEY)))


def _upgrade_on(connection: sa.Connection, schema: Schema) -> None:
    from alembic import command

    config = _config(schema)
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
