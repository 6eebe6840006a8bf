"""`access_tokens.write`: a token may write through the HTTP session API (`token create --write`).

Tokens made before are read-only, as they were (the audit page's).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("access_tokens") as table:
        table.add_column(sa.Column("write", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("access_tokens") as table:
        table.drop_column("write")
