"""Reading a session for audit, in one consistent snapshot: every ledger record, the digest of each
payload as stored, the chain head the session row names, and the projection the backend stores.

On the SQL ledger everything is read in one transaction (REPEATABLE READ on PostgreSQL; a read
transaction is a snapshot in SQLite's WAL mode), straight from the tables of docs/architecture.md:
the records, the `sessions` row (version, head, state, window base, stats) and `window_slots`
(the window's prefix and the rewound rows). The payload's stored text is hashed as it is: it is
the canonical text the ledger hashed when it wrote the row (PostgreSQL `json` and SQLite text keep
it byte for byte), so a match proves the content without re-serializing it.

Other ledgers (the in-memory one) are read through the `Ledger` port, again until no write split
the read; their payloads are hashed through `domain.hashing.canonical`, the rule itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sessionledger.domain.codec import format_timestamp
from sessionledger.domain.hashing import canonical, sha256_hex
from sessionledger.domain.ports import Ledger
from sessionledger.domain.records import Kind, LedgerRecord
from sessionledger.domain.sessions import APP_PREFIX, USER_PREFIX, Session
from sessionledger.domain.window import WindowShape, WindowStats
from sessionledger.infrastructure.audit.chain import ChainHead
from sessionledger.infrastructure.ledger.records import read_records, snapshot
from sessionledger.infrastructure.ledger.schema import sessions, window_slots
from sessionledger.infrastructure.ledger.sql import SqlLedger

_STABLE_READS = 5


@dataclass(frozen=True, slots=True)
class StoredProjection:
    """What the backend stores for the session, at `version`: `None` fields once it is deleted.

    `session` holds the session row's own fields as the `created` record writes them; `window`
    the window's positions in order; `hidden` the rewound positions (`None` when the backend
    does not expose them).
    """

    version: int
    session: Mapping[str, Any] | None
    state: Mapping[str, Any] | None
    window: tuple[int, ...] | None
    hidden: frozenset[int] | None
    stats: WindowStats | None


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """A session's records by position, the sha256 of each stored payload (`None`: erased), the
    head its session row names (`None` when the backend keeps none apart from the records), and
    the stored projection (`None` when the session has no session row)."""

    records: list[LedgerRecord]
    digests: list[str | None]
    head: ChainHead | None
    stored: StoredProjection | None


def read_snapshot(ledger: Ledger, session_id: str) -> LedgerSnapshot:
    if isinstance(ledger, SqlLedger):
        return _read_sql(ledger.engine, session_id)
    return _read_port(ledger, session_id)


def session_fields(session: Session) -> dict[str, Any]:
    """A session's own fields, formatted as its `created` record holds them."""
    return {
        "user_id": session.user_id,
        "app_name": session.app_name,
        "metadata": dict(session.metadata),
        "created_at": format_timestamp(session.created_at),
        "expires_at": None if session.expires_at is None else format_timestamp(session.expires_at),
    }


def _read_port(ledger: Ledger, session_id: str) -> LedgerSnapshot:
    for _ in range(_STABLE_READS):
        version = ledger.version(session_id)
        window = ledger.window(session_id)
        session = ledger.get_session(session_id)
        records = list(ledger.records(session_id))
        if ledger.version(session_id) == version and (window is None or window.head.version == version):
            break
    digests = [None if r.payload is None else sha256_hex(canonical(r.payload)) for r in records]
    if session is None or window is None:
        stored = StoredProjection(records[-1].version if records else 0, None, None, None, None, None)
    else:
        state = {k: v for k, v in session.state.items() if not k.startswith((APP_PREFIX, USER_PREFIX))}
        stored = StoredProjection(
            version, session_fields(session), state, window.positions, None, window.stats
        )
    return LedgerSnapshot(records, digests, None, stored if records else None)


class Slot(NamedTuple):
    """A `window_slots` row of a session."""

    position: int
    ordinal: int | None
    rewound: bool


@dataclass(frozen=True, slots=True)
class StoredRows:
    """A session's row (`None`: it has none) and its window slots, as stored."""

    row: Any
    slots: list[Slot]

    @property
    def head(self) -> ChainHead | None:
        return None if self.row is None else ChainHead(self.row.head_position, self.row.head_hash)

    @property
    def deleted(self) -> bool:
        return self.row is not None and self.row.deleted_at is not None


def read_stored(conn: sa.Connection, session_id: str) -> StoredRows:
    """The session row and window slots, inside `conn`'s transaction."""
    row = conn.execute(sa.select(sessions).where(sessions.c.id == session_id)).first()
    slots = conn.execute(
        sa.select(window_slots.c.position, window_slots.c.ordinal, window_slots.c.rewound).where(
            window_slots.c.session_id == session_id
        )
    ).all()
    return StoredRows(row, [Slot(*slot) for slot in slots])


def _read_sql(engine: sa.Engine, session_id: str) -> LedgerSnapshot:
    sha256 = hashlib.sha256
    with snapshot(engine) as conn:
        stored = read_stored(conn, session_id)
        records: list[LedgerRecord] = []
        digests: list[str | None] = []
        for record, text in read_records(conn, session_id):
            records.append(record)
            digests.append(None if text is None else sha256(text).hexdigest())
    events = [record.position for record in records if record.kind is Kind.EVENT]
    return LedgerSnapshot(records, digests, stored.head, stored_projection(stored, events))


def stored_projection(stored: StoredRows, events: Iterable[int]) -> StoredProjection | None:
    """What the rows store for the session, its window as positions given its event positions."""
    row, slots = stored.row, stored.slots
    if row is None:
        return None
    if row.deleted_at is not None:
        return StoredProjection(row.version, None, None, None, None, None)
    prefix = [position for position, ordinal, _ in sorted(slots, key=lambda s: (s.ordinal is None, s.ordinal))
              if ordinal is not None]  # fmt: skip
    hidden = frozenset(position for position, _, rewound in slots if rewound)
    _, window = WindowShape(prefix, row.window_base, set(hidden)).split(events)
    return StoredProjection(
        version=row.version,
        session={
            "user_id": row.user_id,
            "app_name": row.app_name,
            "metadata": row.metadata,
            "created_at": format_timestamp(row.created_at),
            "expires_at": None if row.expires_at is None else format_timestamp(row.expires_at),
        },
        state=row.state,
        window=tuple(window),
        hidden=hidden,
        stats=WindowStats(
            row.window_events,
            row.window_turns,
            row.window_bytes,
            row.window_tokens,
            row.window_uncounted,
            row.events_since_summary,
        ),
    )
