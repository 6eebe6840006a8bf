"""The `access_tokens` table: tokens of the audit page (`sessionledger token create`), secrets hashed.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op
from sessionledger.infrastructure.ledger.schema import Key, UtcDateTime, table_options

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "access_tokens",
        sa.Column("token_id", Key, primary_key=True),
        sa.Column("secret_sha256", sa.Text, nullable=False),
        sa.Column("user_id", Key, nullable=False),
        sa.Column("admin", sa.Boolean, nullable=False),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.Column("revoked_at", UtcDateTime),
        **table_options(op.get_bind()),
    )


def downgrade() -> None:
    op.drop_table("access_tokens")
