"""The ledger's tables (SQLAlchemy Core), one definition for PostgreSQL, SQLite and MariaDB/MySQL.

See docs/architecture.md "The ledger". Every table but the relay's view of `ledger` is keyed by
session id first, so the ledger can later be hash-partitioned by session.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sessionledger.domain.hashing import canonical
from sessionledger.domain.ids import MAX_ID_LENGTH
from sqlalchemy.types import TypeDecorator, UserDefinedType

loads: Callable[[str | bytes | bytearray | memoryview], Any] = orjson.loads
"""Parse a stored payload with orjson (several times faster than `json` on the read path).

orjson reads an integer beyond 64 bits as a float, so writes refuse those
(`domain.codec.ensure_json`) and every stored value comes back exact
(tests/unit/test_json_values.py pins what orjson does). orjson itself, not a function around it:
it runs once per JSON value read, and each Python call around it cost 0.1-0.3 ms of a
1,000-payload read."""


AnySelect = sa.Select[*tuple[Any, ...]]
"""A SELECT of whatever columns: SQLAlchemy types a select by its columns, and the ledger's
statements are built up and passed on for many."""


class _JsonColumn(UserDefinedType[Any]):
    """PostgreSQL `json` (not `jsonb`): it stores the text exactly as given.

    `jsonb` re-renders numbers (a float 1e20 comes back as the integer 100000000000000000000),
    which would break both type fidelity and the content hash of the canonical text.
    """

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "JSON"


class Json(TypeDecorator[Any]):
    """A JSON document stored as its canonical text; a `str` value is taken as already canonical.

    The ledger binds the very text it hashed, so a payload is serialized once per write.
    """

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(_JsonColumn())
        # MySQL's JSON re-renders the text (MariaDB's checks it): LONGTEXT keeps it as given, up to 4 GB
        return dialect.type_descriptor(sa.Text(LONGTEXT) if dialect.name == "mysql" else sa.Text())

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return canonical(value)

    def result_processor(self, dialect: sa.Dialect, coltype: Any) -> Any:
        """None on PostgreSQL: psycopg's own `json` loader (orjson, set up in `postgres.py`) has
        parsed the value already, and a call per value costs about half a microsecond per row on
        every read of a payload (0.5 ms of a 1,000-event window read)."""
        if dialect.name == "postgresql":
            return None
        return super().result_processor(dialect, coltype)

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> Any:
        return loads(value) if isinstance(value, str) else value


LONGTEXT = 2**32 - 1
"""A TEXT of this length is MySQL's and MariaDB's LONGTEXT (their TEXT holds 64 KB)."""


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out; SQLite keeps naive UTC text, which sorts correctly, and
    MariaDB/MySQL a naive UTC `DATETIME(6)` (their `TIMESTAMP` ends in 2038, and a plain `DATETIME`
    drops the microseconds)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "mysql":
            from sqlalchemy.dialects.mysql import DATETIME  # the dialect's module, loaded with it

            return dialect.type_descriptor(DATETIME(fsp=6))
        return super().load_dialect_impl(dialect)

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not UTC:  # a new datetime per call: two per appended event
            value = value.astimezone(UTC)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def result_processor(self, dialect: sa.Dialect, coltype: Any) -> Any:
        """None on PostgreSQL: every connection's session time zone is UTC (`postgres.py`), so psycopg
        hands out aware datetimes in `datetime.UTC` already, and a call per value costs about a
        microsecond per ledger row (two timestamps) on every read of records."""
        if dialect.name == "postgresql":
            return None
        return super().result_processor(dialect, coltype)

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""64-bit on PostgreSQL; on SQLite an INTEGER PRIMARY KEY is the rowid (itself 64-bit)."""

Key = sa.Text().with_variant(sa.String(MAX_ID_LENGTH), "mysql")
"""An id column that is indexed: MariaDB and MySQL index no TEXT without a prefix length, so there
it is a VARCHAR as long as an id may be (`domain.ids`); 255 4-byte characters, twice in the ledger's
keys, stay within InnoDB's 3,072-byte index entry."""


def table_options(bind: sa.Connection) -> dict[str, Any]:
    """The keyword arguments every table of the ledger is created with: on MariaDB and MySQL, InnoDB
    in `utf8mb4` (4-byte characters) under a binary collation without padding, so ids compare as
    PostgreSQL and SQLite compare them (`"a" != "A"`, `"a" != "a "`: the servers' defaults fold case,
    and their `_bin` collations ignore trailing spaces); nothing elsewhere."""
    if bind.dialect.name != "mysql":
        return {}
    return {
        "mysql_engine": "InnoDB",
        "mysql_charset": "utf8mb4",
        "mysql_collate": mysql_collation(bind.dialect),
    }


def mysql_collation(dialect: sa.Dialect) -> str:
    """The ledger's `utf8mb4` collation on MariaDB or on MySQL (`table_options`)."""
    return "utf8mb4_nopad_bin" if getattr(dialect, "is_mariadb", False) else "utf8mb4_0900_bin"


metadata = sa.MetaData()

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", Key, primary_key=True),
    sa.Column("app_name", Key, nullable=False),
    sa.Column("user_id", Key, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime),
    sa.Column("metadata", Json, nullable=False),
    sa.Column("state", Json, nullable=False),
    sa.Column("deleted_at", UtcDateTime),
    # the contract's event_version: the compare-and-swap column
    sa.Column("version", sa.BigInteger, nullable=False),
    # the hash chain head: the session's last ledger row
    sa.Column("head_position", sa.BigInteger, nullable=False),
    sa.Column("head_hash", sa.Text, nullable=False),
    # the window projection: prefix in window_slots, then event rows after window_base
    sa.Column("window_base", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("window_epoch", sa.Integer, nullable=False, server_default="0"),
    # running window stats, so triggers decide in O(1)
    sa.Column("window_events", sa.Integer, nullable=False, server_default="0"),
    sa.Column("window_turns", sa.Integer, nullable=False, server_default="0"),
    sa.Column("window_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("window_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("window_uncounted", sa.Integer, nullable=False, server_default="0"),
    sa.Column("events_since_summary", sa.Integer, nullable=False, server_default="0"),
    # compaction lease (workers claim a session briefly, never across the LLM call)
    sa.Column("lease_owner", sa.Text),
    sa.Column("lease_until", UtcDateTime),
    sa.Index("ix_sessions_user", "user_id", "app_name", "created_at"),
    sa.Index("ix_sessions_expires_at", "expires_at"),
)

ledger = sa.Table(
    "ledger",
    metadata,
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
    # partial on PostgreSQL and SQLite (`WHERE event_id IS NOT NULL`, migration 0005: only event
    # records carry an id, and a NULL needs no index entry); the predicate lives in the migration
    # alone, because a dialect keyword here would import every dialect it names into every process
    sa.Index("uq_ledger_session_event", "session_id", "event_id", unique=True),
)

window_slots = sa.Table(
    "window_slots",
    metadata,
    sa.Column("session_id", Key, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("ordinal", sa.Integer),
    sa.Column("rewound", sa.Boolean, nullable=False, server_default=sa.false()),
)

app_states = sa.Table(
    "app_states",
    metadata,
    sa.Column("app_name", Key, primary_key=True),
    sa.Column("state", Json, nullable=False),
)

user_states = sa.Table(
    "user_states",
    metadata,
    sa.Column("app_name", Key, primary_key=True),
    sa.Column("user_id", Key, primary_key=True),
    sa.Column("state", Json, nullable=False),
)

relay_offsets = sa.Table(
    "relay_offsets",
    metadata,
    sa.Column("name", Key, primary_key=True),
    sa.Column("global_position", sa.BigInteger, nullable=False),
)

worker_counters = sa.Table(
    "worker_counters",
    metadata,
    sa.Column("name", Key, primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)
"""Queue counters summed over every worker process (`infrastructure.ledger.counters`)."""

redeliveries = sa.Table(
    "redeliveries",
    metadata,
    sa.Column("message_id", Key, primary_key=True),
    sa.Column("deliveries", sa.Integer, nullable=False),
    sa.Column("first_at", UtcDateTime, nullable=False),
)
"""Ingest batches delivered again after their worker was lost (`infrastructure.ledger.redeliveries`)."""

access_tokens = sa.Table(
    "access_tokens",
    metadata,
    sa.Column("token_id", Key, primary_key=True),
    sa.Column("secret_sha256", sa.Text, nullable=False),
    sa.Column("user_id", Key, nullable=False),
    sa.Column("admin", sa.Boolean, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("revoked_at", UtcDateTime),
    sa.Column("write", sa.Boolean, nullable=False, server_default=sa.false()),
)
"""Tokens of the audit page, their secrets hashed (`infrastructure.ledger.access_tokens`); a
revoked token keeps its row, so who could read what stays on record."""
