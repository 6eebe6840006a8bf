"""The keyword index (`infrastructure.ledger.text_index`).

SQLite: the FTS5 trigram table `ledger_fts` and the triggers that keep it in the writing
transaction, filled here from the rows already stored (one pass over the ledger in this
migration's transaction, during which the file's writers wait; docs/production.md gives its
cost). PostgreSQL: the extensions, the empty `ledger_text` table and its GIN index. The index is
filled behind the writes by `TextIndexer`, for an existing ledger too, so the migration itself
takes a moment and appends go on while the index catches up (searches are exact meanwhile: rows
past a session's mark are scanned).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op
from sessionledger.infrastructure.ledger.schema import ledger
from sessionledger.infrastructure.ledger.text_index import FTS_TABLE, SEARCHABLE_TEXT

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _text_of(row: str) -> str:
    """`SELECT global_position, <SEARCHABLE_TEXT> FROM ledger WHERE global_position = <row>`, as
    SQLite text: the trigger indexes exactly the expression the scan matches."""
    select = sa.select(ledger.c.global_position, SEARCHABLE_TEXT).where(
        ledger.c.global_position == sa.literal_column(f"{row}.global_position"),
        SEARCHABLE_TEXT.is_not(None),
    )
    return str(select.compile(dialect=op.get_bind().dialect, compile_kwargs={"literal_binds": True}))


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "mysql":  # no trigram index there: keyword search stays the scan
        return
    if bind.dialect.name == "sqlite":
        op.execute(f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(text, content='', tokenize='trigram')")
        # a contentless table forgets its text: a delete names the very text it indexed
        op.execute(
            f"CREATE TRIGGER {FTS_TABLE}_insert AFTER INSERT ON ledger BEGIN "
            f"INSERT INTO {FTS_TABLE} (rowid, text) {_text_of('new')}; END"
        )
        op.execute(
            f"CREATE TRIGGER {FTS_TABLE}_before_update BEFORE UPDATE OF payload ON ledger BEGIN "
            f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, text) SELECT 'delete', * FROM "
            f"({_text_of('old')}); END"
        )
        op.execute(
            f"CREATE TRIGGER {FTS_TABLE}_after_update AFTER UPDATE OF payload ON ledger BEGIN "
            f"INSERT INTO {FTS_TABLE} (rowid, text) {_text_of('new')}; END"
        )
        every = sa.select(ledger.c.global_position, SEARCHABLE_TEXT).where(SEARCHABLE_TEXT.is_not(None))
        op.execute(_fill(every))
        return
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.create_table(
        "ledger_text",
        sa.Column("session_id", sa.Text, primary_key=True),
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("text", sa.Text),
    )
    op.execute(
        "CREATE INDEX ix_ledger_text_trigrams ON ledger_text USING gin (session_id, text gin_trgm_ops)"
    )


def _fill(every: sa.Select[tuple[int, str]]) -> str:
    compiled = every.compile(dialect=op.get_bind().dialect, compile_kwargs={"literal_binds": True})
    return f"INSERT INTO {FTS_TABLE} (rowid, text) {compiled}"


def downgrade() -> None:
    if op.get_bind().dialect.name == "mysql":
        return
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("insert", "before_update", "after_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {FTS_TABLE}_{trigger}")
        op.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")
        return
    op.drop_table("ledger_text")
