"""The `redeliveries` table: how often the broker delivered an ingest batch again after losing
the worker that had it, so a batch that kills its worker every time is dead-lettered.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op
from sessionledger.infrastructure.ledger.schema import Key, UtcDateTime, table_options

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "redeliveries",
        sa.Column("message_id", Key, primary_key=True),
        sa.Column("deliveries", sa.Integer, nullable=False),
        sa.Column("first_at", UtcDateTime, nullable=False),
        **table_options(op.get_bind()),
    )


def downgrade() -> None:
    op.drop_table("redeliveries")
