"""The initial ledger schema, and on PostgreSQL and MariaDB/MySQL the `ledger_guard` triggers.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op
from sessionledger.infrastructure.ledger.schema import BigInt, Json, Key, UtcDateTime, table_options

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Refuses UPDATE, DELETE and TRUNCATE of ledger rows except (a) filling token_count once, from
# NULL, with every other column unchanged, and (b) nulling the payload of a session whose id the
# transaction named in `SET LOCAL sessionledger.erasing` (the privacy-erasure path).
LEDGER_GUARD = """
CREATE FUNCTION ledger_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'TRUNCATE') THEN
        RAISE EXCEPTION 'ledger rows are append-only: % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.global_position, NEW.session_id, NEW.position, NEW.version, NEW.event_id, NEW.kind,
        NEW.occurred_at, NEW.recorded_at, NEW.event_type, NEW.branch, NEW.synthetic,
        NEW.content_hash, NEW.prev_hash, NEW.row_hash)
       IS NOT DISTINCT FROM
       (OLD.global_position, OLD.session_id, OLD.position, OLD.version, OLD.event_id, OLD.kind,
        OLD.occurred_at, OLD.recorded_at, OLD.event_type, OLD.branch, OLD.synthetic,
        OLD.content_hash, OLD.prev_hash, OLD.row_hash)
    THEN
        IF OLD.token_count IS NULL AND NEW.token_count IS NOT NULL
           AND NEW.payload::text IS NOT DISTINCT FROM OLD.payload::text THEN
            RETURN NEW;
        END IF;
        IF NEW.payload IS NULL AND NEW.token_count IS NOT DISTINCT FROM OLD.token_count
           AND current_setting('sessionledger.erasing', true) = OLD.session_id THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'ledger rows are append-only: UPDATE of % position % refused',
        OLD.session_id, OLD.position USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER ledger_guard BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_guard();
CREATE TRIGGER ledger_guard_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_guard();
"""

# The same rule on MariaDB and MySQL, in their trigger language: one trigger per event, the erasure
# path's session id in the connection's `@sessionledger_erasing` (set and cleared by the erasing
# transaction), `<=>` for IS NOT DISTINCT FROM, and the payloads compared as bytes. They have no
# TRUNCATE trigger: TRUNCATE needs the DROP privilege, which an application's user should not hold.
_MYSQL_REFUSED = "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'ledger rows are append-only: {} refused'"
MYSQL_LEDGER_GUARD = (
    f"""
CREATE TRIGGER ledger_guard_delete BEFORE DELETE ON ledger FOR EACH ROW
    {_MYSQL_REFUSED.format("DELETE")}
""",
    f"""
CREATE TRIGGER ledger_guard BEFORE UPDATE ON ledger FOR EACH ROW
BEGIN
    IF NOT (NEW.global_position <=> OLD.global_position AND NEW.session_id <=> OLD.session_id
            AND NEW.position <=> OLD.position AND NEW.version <=> OLD.version
            AND NEW.event_id <=> OLD.event_id AND NEW.kind <=> OLD.kind
            AND NEW.occurred_at <=> OLD.occurred_at AND NEW.recorded_at <=> OLD.recorded_at
            AND NEW.event_type <=> OLD.event_type AND NEW.branch <=> OLD.branch
            AND NEW.synthetic <=> OLD.synthetic AND NEW.content_hash <=> OLD.content_hash
            AND NEW.prev_hash <=> OLD.prev_hash AND NEW.row_hash <=> OLD.row_hash)
       OR NOT ((OLD.token_count IS NULL AND NEW.token_count IS NOT NULL
                AND CAST(NEW.payload AS BINARY) <=> CAST(OLD.payload AS BINARY))
               OR (NEW.payload IS NULL AND NEW.token_count <=> OLD.token_count
                   AND CAST(@sessionledger_erasing AS BINARY) <=> CAST(OLD.session_id AS BINARY)))
    THEN
        {_MYSQL_REFUSED.format("UPDATE")};
    END IF;
END
""",
)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", Key, primary_key=True),
        sa.Column("app_name", Key, nullable=False),
        sa.Column("user_id", Key, nullable=False),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.Column("expires_at", UtcDateTime),
        sa.Column("metadata", Json, nullable=False),
        sa.Column("state", Json, nullable=False),
        sa.Column("deleted_at", UtcDateTime),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("head_position", sa.BigInteger, nullable=False),
        sa.Column("head_hash", sa.Text, nullable=False),
        sa.Column("window_base", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("window_epoch", sa.Integer, nullable=False, server_default="0"),
        sa.Column("window_events", sa.Integer, nullable=False, server_default="0"),
        sa.Column("window_turns", sa.Integer, nullable=False, server_default="0"),
        sa.Column("window_bytes", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("window_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("window_uncounted", sa.Integer, nullable=False, server_default="0"),
        sa.Column("events_since_summary", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.Text),
        sa.Column("lease_until", UtcDateTime),
        **table_options(op.get_bind()),
    )
    op.create_index("ix_sessions_user", "sessions", ["user_id", "app_name", "created_at"])
    op.create_index("ix_sessions_expires_at", "sessions", ["expires_at"])
    op.create_table(
        "ledger",
        sa.Column("global_position", BigInt, sa.Identity(), primary_key=True),
        sa.Column("session_id", Key, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("event_id", Key),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("occurred_at", UtcDateTime, nullable=False),
        sa.Column("recorded_at", UtcDateTime, nullable=False),
        sa.Column("event_type", sa.Text),
        sa.Column("branch", sa.Text),
        sa.Column("synthetic", sa.Boolean, nullable=False),
        sa.Column("payload", Json),
        sa.Column("token_count", sa.Integer),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.Text, nullable=False),
        sa.Column("row_hash", sa.Text, nullable=False),
        sa.UniqueConstraint("session_id", "position", name="uq_ledger_session_position"),
        sa.UniqueConstraint("session_id", "event_id", name="uq_ledger_session_event"),
        **table_options(op.get_bind()),
    )
    op.create_table(
        "window_slots",
        sa.Column("session_id", Key, primary_key=True),
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("ordinal", sa.Integer),
        sa.Column("rewound", sa.Boolean, nullable=False, server_default=sa.false()),
        **table_options(op.get_bind()),
    )
    op.create_table(
        "app_states",
        sa.Column("app_name", Key, primary_key=True),
        sa.Column("state", Json, nullable=False),
        **table_options(op.get_bind()),
    )
    op.create_table(
        "user_states",
        sa.Column("app_name", Key, primary_key=True),
        sa.Column("user_id", Key, primary_key=True),
        sa.Column("state", Json, nullable=False),
        **table_options(op.get_bind()),
    )
    op.create_table(
        "relay_offsets",
        sa.Column("name", Key, primary_key=True),
        sa.Column("global_position", sa.BigInteger, nullable=False),
        **table_options(op.get_bind()),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(LEDGER_GUARD)
    elif op.get_bind().dialect.name == "mysql":
        for trigger in MYSQL_LEDGER_GUARD:
            op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS ledger_guard_truncate ON ledger")
        op.execute("DROP TRIGGER IF EXISTS ledger_guard ON ledger")
        op.execute("DROP FUNCTION IF EXISTS ledger_guard()")
    elif op.get_bind().dialect.name == "mysql":
        op.execute("DROP TRIGGER IF EXISTS ledger_guard")
        op.execute("DROP TRIGGER IF EXISTS ledger_guard_delete")
    for table in ("relay_offsets", "user_states", "app_states", "window_slots", "ledger", "sessions"):
        op.drop_table(table)
