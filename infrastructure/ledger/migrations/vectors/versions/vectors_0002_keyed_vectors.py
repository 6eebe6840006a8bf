"""The keyed vector table (`keyed_vectors`: one vector per owner, namespace, key and field path, with
the ledger position that recorded it) and its marks (`keyed_vector_marks`: how far each owner's
namespace has been brought up to date with the ledger), for `LedgerStore`'s semantic search.

Both hold derived data: a store rebuilds them from the ledger's records when they are behind or
empty, so this revision starts them empty and a downgrade may drop them.

Revision ID: vectors_0002
Revises: vectors_0001
Create Date: 2026-11-28
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sessionledger.infrastructure.ledger.schema import BigInt
from sessionledger.infrastructure.vectors.schema import KEYED_MARKS, KEYED_TABLE

revision = "vectors_0002"
down_revision = "vectors_0001"
branch_labels = None
depends_on = None


class _Vector(sa.types.UserDefinedType[Any]):
    """pgvector's `vector`, of any dimension (the owner's index fixes it; a search compares only
    vectors of the query's dimension)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"


def upgrade() -> None:
    op.create_table(
        KEYED_TABLE,
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("field", sa.Text, nullable=False),
        sa.Column("position", BigInt, nullable=False),
        sa.Column("embedding", sa.LargeBinary().with_variant(_Vector(), "postgresql"), nullable=False),
        sa.PrimaryKeyConstraint("owner", "namespace", "key", "field"),
    )
    op.create_table(
        KEYED_MARKS,
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("position", BigInt, nullable=False),
        sa.PrimaryKeyConstraint("owner", "namespace"),
    )


def downgrade() -> None:
    op.drop_table(KEYED_MARKS)
    op.drop_table(KEYED_TABLE)
