"""The raw baselines: plain psycopg on the benchmark's own database, no library in between."""

from __future__ import annotations

from typing import Any

import psycopg
from sessionledger.domain import Message, SessionEvent
from sessionledger.domain.records import event_draft

_COPY = "CREATE TABLE raw_ledger (LIKE ledger INCLUDING ALL)"
"""The ledger table's columns, defaults, identity, constraints and indexes (not its update guard)."""
_INSERT = """INSERT INTO raw_ledger (session_id, position, version, event_id, kind, occurred_at,
    recorded_at, event_type, branch, synthetic, payload, token_count, content_hash, prev_hash, row_hash)
    VALUES (%s, %s, %s, %s, 'event', %s, now(), %s, NULL, false, %s, NULL, %s, %s, %s)"""
_WINDOW = "SELECT event_id, payload FROM ledger WHERE session_id = %s AND kind = 'event' ORDER BY position"


def create_table(conn: psycopg.Connection) -> None:
    conn.execute(_COPY)
    conn.commit()


def row_of(message: Message, position: int) -> tuple[Any, ...]:
    """The row the ledger would store for the message (same payload text, same hashes), built
    before the clock starts: the raw loop itself does nothing but INSERT and COMMIT."""
    draft = event_draft(SessionEvent(session_id="raw", message=message))
    record = draft.place("raw", position, position, "0" * 64)
    return (
        "raw", position, position, record.event_id, record.occurred_at, record.event_type,
        draft.text, record.content_hash, record.prev_hash, record.row_hash,
    )  # fmt: skip


def insert(conn: psycopg.Connection, row: tuple[Any, ...]) -> None:
    """One event, one transaction: INSERT then COMMIT (psycopg opens the transaction itself);
    on an autocommit connection the INSERT is its own transaction (one round trip)."""
    conn.execute(_INSERT, row)
    if not conn.autocommit:
        conn.commit()


_COPY_ROWS = """COPY raw_ledger (session_id, position, version, event_id, kind, occurred_at, recorded_at,
    event_type, branch, synthetic, payload, token_count, content_hash, prev_hash, row_hash) FROM STDIN"""


def copy(conn: psycopg.Connection, rows: list[tuple[Any, ...]], session_id: str) -> None:
    """`row_of` rows, stored under `session_id`, in one COPY and one transaction: the floor of any
    bulk load (no statement per row)."""
    with conn.cursor().copy(_COPY_ROWS) as copying:
        for _, position, version, event_id, occurred_at, event_type, text, content, prev, row in rows:
            copying.write_row((session_id, position, version, event_id, "event", occurred_at, "now",
                               event_type, None, False, text, None, content, prev, row))  # fmt: skip
    conn.commit()


def select_window(conn: psycopg.Connection, session_id: str) -> list[tuple[Any, ...]]:
    """A never-compacted session's window: its event rows by position, payloads decoded by psycopg."""
    rows = conn.execute(_WINDOW, (session_id,)).fetchall()
    conn.commit()
    return rows
