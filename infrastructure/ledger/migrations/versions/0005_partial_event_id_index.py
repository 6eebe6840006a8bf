"""The ledger's unique (session_id, event_id) index holds only the rows that have an event id.

Only event records carry one; every other record (a session's creation, a compaction, an
adapter's entry or forget record: each LangGraph checkpoint and pending write) paid an index
entry under a NULL id that no query reads and no uniqueness needs (NULLs never clash). The index
is now partial (`WHERE event_id IS NOT NULL`), on PostgreSQL and SQLite alike; the statements
that read it (`statements.taken_event_ids`: `event_id IN (...)`) imply its predicate, so both
planners still use it, and a repeated event id is refused by it as before (the idempotent
append). PostgreSQL builds the new index in place; SQLite cannot drop a table's constraint, so
the table is copied into its new form (Alembic's batch mode), every row as it was. MariaDB and
MySQL have no partial indexes: their unique index stays as it was (NULLs never clash there either).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

NAME = "uq_ledger_session_event"
WITH_ID = "event_id IS NOT NULL"


def upgrade() -> None:
    where = sa.text(WITH_ID)
    if op.get_bind().dialect.name == "mysql":
        return
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(NAME, "ledger", type_="unique")
        op.create_index(NAME, "ledger", ["session_id", "event_id"], unique=True, postgresql_where=where)
        return
    with op.batch_alter_table("ledger", recreate="always") as batch:
        batch.drop_constraint(NAME, type_="unique")
        batch.create_index(NAME, ["session_id", "event_id"], unique=True, sqlite_where=where)


def downgrade() -> None:
    if op.get_bind().dialect.name == "mysql":
        return
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index(NAME, table_name="ledger")
        op.create_unique_constraint(NAME, "ledger", ["session_id", "event_id"])
        return
    with op.batch_alter_table("ledger", recreate="always") as batch:
        batch.drop_index(NAME)
        batch.create_unique_constraint(NAME, ["session_id", "event_id"])
