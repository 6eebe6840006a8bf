"""The queue's `worker_counters` table, which workers used to create for themselves.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op
from sessionledger.infrastructure.ledger.schema import Key, table_options

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("worker_counters"):  # created by a worker before 0002
        return
    op.create_table(
        "worker_counters",
        sa.Column("name", Key, primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
        **table_options(op.get_bind()),
    )


def downgrade() -> None:
    op.drop_table("worker_counters")
