"""The vector stores' `chat_memory_vectors` table, which the stores created for themselves before,
and on PostgreSQL the pgvector extension (`ExtensionMissing`, and nothing recorded, without it).

The embedding column has no dimension (`vector`, a BLOB on SQLite): a revision cannot know the
embedder's, so the first vectors stored fix it, which the stores check. A table a store made
before this revision (PostgreSQL: `vector(N)`) is kept as it is, with its rows and its index.

Revision ID: vectors_0001
Revises:
Create Date: 2026-11-28
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sessionledger.infrastructure.ledger.schema import BigInt
from sessionledger.infrastructure.vectors.schema import TABLE, require_pgvector

revision = "vectors_0001"
down_revision = None
branch_labels = None
depends_on = None


class _Vector(sa.types.UserDefinedType[Any]):
    """pgvector's `vector`, of any dimension."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        require_pgvector(bind)
        op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    if sa.inspect(bind).has_table(TABLE):  # made by a store before this revision
        return
    op.create_table(
        TABLE,
        sa.Column("id", BigInt, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("conversation_id", sa.Text, nullable=False),
        sa.Column("message_type", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", sa.LargeBinary().with_variant(_Vector(), "postgresql"), nullable=False),
    )
    op.create_index(f"{TABLE}_owner", TABLE, ["user_id", "conversation_id"])


def downgrade() -> None:
    op.drop_table(TABLE)
