"""Creates or upgrades the ledger schema on open, safely when several processes open at once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.engine import WRITE

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
ADVISORY_LOCK_KEY = 0x5E551071ED6E
"""pg_advisory_lock key serializing schema upgrades across processes."""
HEAD_REVISION = "0004"
"""The newest migration's revision, written here so that opening a ledger that is up to date (every
reading command, every writer after the first) needs no alembic, whose import costs more than all
the rest of a command's; tests/integration/test_migrations.py holds it equal to alembic's head."""


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str:
    return HEAD_REVISION


def current_revision(connection: sa.Connection) -> str | None:
    if not sa.inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: sa.Engine) -> None:
    """Bring the schema to the head revision; a no-op (one query) when it is there already.

    PostgreSQL: the upgrade runs in one transaction under a session advisory lock. SQLite: in one
    BEGIN IMMEDIATE transaction, which is the database's write lock. Either way a second opener
    waits, then finds the schema current.
    """
    with engine.connect() as connection:
        if current_revision(connection) == head_revision():
            return
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            # a schema change is no request: neither it nor the wait for another process's may time out
            connection.execute(sa.text("SET LOCAL statement_timeout = 0"))
            connection.execute(sa.select(sa.func.pg_advisory_lock(ADVISORY_LOCK_KEY)))
            try:
                _upgrade_on(connection)
                connection.commit()
            finally:
                connection.rollback()
                connection.execute(sa.select(sa.func.pg_advisory_unlock(ADVISORY_LOCK_KEY)))
                connection.commit()
    else:
        with engine.execution_options(**{WRITE: True}).begin() as connection:
            _upgrade_on(connection)


def _upgrade_on(connection: sa.Connection) -> None:
    from alembic import command

    config = _config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
