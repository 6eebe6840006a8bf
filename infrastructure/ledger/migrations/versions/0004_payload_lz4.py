"""PostgreSQL: the ledger's payloads compressed with lz4, not pglz, from now on.

A payload too big for its row (about 2 KB, a long model answer) is compressed when stored and
decompressed on every read of it, and pglz decompresses slowly: a 1,000-event window read with a
quarter of its payloads compressed took 0.7-1 ms less server time with lz4 (PostgreSQL 15). Only
the setting changes: rows already stored keep their pglz payloads, which PostgreSQL still reads
(each value records its own method), so no row is rewritten and no hash moves. A server without
lz4 (PostgreSQL before 14, or built without it) keeps pglz. SQLite does not compress.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _settable(bind: sa.Connection) -> bool:
    """Whether the server has per-column compression (PostgreSQL 14 and later)."""
    if bind.dialect.name != "postgresql":
        return False
    return int(bind.execute(sa.text("SHOW server_version_num")).scalar_one()) >= 140000


def upgrade() -> None:
    bind = op.get_bind()
    if not _settable(bind):
        return
    try:
        with bind.begin_nested():  # a server built without lz4 refuses it: pglz stays
            bind.execute(sa.text("ALTER TABLE ledger ALTER COLUMN payload SET COMPRESSION lz4"))
    except sa.exc.DBAPIError as error:
        if "lz4" not in str(error.orig):
            raise


def downgrade() -> None:
    if _settable(op.get_bind()):
        op.execute("ALTER TABLE ledger ALTER COLUMN payload SET COMPRESSION pglz")
