"""The vector stores' tables, brought up to date by the ledger's migration runner (its `vectors`
history, recorded apart from the ledger's), or a one-line error naming the extension it lacks.

A store migrates its database when it opens, as a ledger does; `sessionledger migrate` migrates
both. The table's layout is the revisions' (`infrastructure/ledger/migrations/vectors/`), not here.
"""

from __future__ import annotations

import sqlalchemy as sa
from sessionledger.infrastructure.ledger.migrate import VECTORS, upgrade

TABLE = "chat_memory_vectors"
KEYED_TABLE = "keyed_vectors"
"""The keyed vectors (`keyed.py`): one per owner, namespace, key and field path (revision vectors_0002)."""
KEYED_MARKS = "keyed_vector_marks"
"""How far each owner's namespace in `KEYED_TABLE` is up to date with the ledger (a position)."""


class ExtensionMissing(ValueError):
    """The database lacks the extension the vector table needs; nothing was created or recorded,
    so a later migrate, once it is installed, creates the table."""


def migrate_vectors(engine: sa.Engine) -> str:
    """Brings the vector table on `engine`'s database to this version's revision (one query when
    it is there already) and returns that revision; `ExtensionMissing` when it cannot be made."""
    upgrade(engine, VECTORS)
    return VECTORS.head


def require_pgvector(connection: sa.Connection) -> None:
    """`ExtensionMissing` unless the PostgreSQL server has pgvector installed (its package; the
    revision itself creates the extension in the database)."""
    available = connection.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    if available is None:
        info = connection.connection.dbapi_connection.info  # type: ignore[union-attr]  # the DB-API connection is psycopg's here (PostgreSQL only), typed as Any or None
        raise ExtensionMissing(no_pgvector(info.host, info.port, info.server_version))


def no_pgvector(host: str, port: int, server_version: int) -> str:
    """What the server lacks and the ways to get it, in one line."""
    major = server_version // 10000
    return (
        f"PostgreSQL at {host}:{port} has no pgvector extension: install it (Debian: "
        f"postgresql-{major}-pgvector, or https://github.com/pgvector/pgvector) and run `sessionledger "
        "migrate`, or use SQLite (sqlite-vec)"
    )
