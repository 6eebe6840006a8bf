"""The active window as a compaction and the evaluator read it: its events, head and running
stats, and the token counts the evaluator fills in.

The window read (also `get_events` of the active window, which an agent makes before every
prompt) and the stats read run on the driver (`driver.py`), each one statement in autocommit (one
round trip): a compaction reads 1,000 events, where SQLAlchemy's per-row layer costs about what the
database does, and the evaluator reads the stats after every append. The token counts are written
on a Core `Connection`, once per batch of counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any, TypeVar

import sqlalchemy as sa
from sessionledger.domain.codec import event_from_payload, message_from_dict
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import Message
from sessionledger.domain.tokens import TokenCounter
from sessionledger.domain.turns import format_event
from sessionledger.domain.window import Window, WindowHead, WindowStats
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.driver import Autocommit, compiled
from sessionledger.infrastructure.ledger.engine import WRITE
from sessionledger.infrastructure.ledger.heads import locked_head
from sessionledger.infrastructure.ledger.rows import stats_of
from sessionledger.infrastructure.ledger.schema import ledger, sessions

T = TypeVar("T")

WINDOW_CHUNK = 50
"""Rows per chunk of a window read: 1,000 rows in chunks of 50 took 20-25% less time than in one."""
WINDOW_ORDER = itemgetter(0, 1)
"""Window entries `(part, part_order, ...)` in window order: the prefix by ordinal, then the tail."""


def _event(session_id: str, row: Any) -> SessionEvent:
    return event_from_payload(session_id, row.event_id, row.payload)


def _message(payload: Mapping[str, Any]) -> Message:
    return message_from_dict(payload["message"])


class WindowReads:
    """The active windows of one database."""

    def __init__(self, engine: sa.Engine, autocommit: Autocommit) -> None:
        self._engine = engine
        self._autocommit = autocommit
        self._writer = engine.execution_options(**{WRITE: True})
        self._window = compiled(statements.WINDOW, engine.dialect)
        self._window_head = compiled(statements.WINDOW_HEAD, engine.dialect)
        self._window_payloads = compiled(statements.WINDOW_PAYLOADS, engine.dialect)

    def window(self, session_id: str) -> Window | None:
        """The active window, its head and stats, in one statement (one snapshot)."""
        values = {"sid": session_id}
        with self._autocommit() as driver:
            head, entries = self._read(driver, values)
            if head is None:  # an empty window, or no such live session
                found = self._window_head.rows(driver.cursor(), values)
                if not found:
                    return None
                head = found[0]
                return Window(
                    WindowHead(head.version, head.window_epoch, head.window_base), (), (), stats_of(head)
                )
        _, _, positions, token_counts, events = zip(*entries, strict=True)
        # never below the base: when the window's newest events were archived (openai-agents'
        # pop_item), a lower read head would move the base back and bring them back into the tail
        return Window(
            WindowHead(head.version, head.window_epoch, max(head.window_base, *positions)),
            events,
            positions,
            stats_of(head),
            token_counts,
        )

    def events(self, session_id: str) -> list[SessionEvent]:
        """The active window's events in order (`get_events` with the active filter): the window
        read of `window()`, without its head."""
        with self._autocommit() as driver:
            _, entries = self._read(driver, {"sid": session_id})
        return [entry[4] for entry in entries]

    def messages(self, session_id: str) -> list[Message]:
        """The active window's messages in order (`get_messages`, the read an agent makes before
        every prompt), built of the window's payloads alone."""
        return self.payloads(session_id, _message)

    def payloads(self, session_id: str, build: Callable[[Mapping[str, Any]], T]) -> list[T]:
        """`build(payload)` of each of the active window's payloads, in order (a history read:
        messages, an adapter's items), each built as soon as its row is read, while the server
        still sends the rows after it.

        Why as they are read, not once all are fetched: a payload is a tree of 7 dicts and lists.
        Fetched whole, 1,000 payloads kept 7,000 of them alive at once, so each read ran about 15
        young-generation collections that moved them all to the old generation, whose full
        collections (tens of ms over a big process's heap) then came about every 8 reads; built
        row by row, only a chunk's trees are ever alive, and a read of 1,000 items ran 4."""
        entries = []
        with self._autocommit() as driver:
            for row in self._window_payloads.stream(driver.cursor(), {"sid": session_id}, WINDOW_CHUNK):
                entries.append((row.part, row.part_order, build(row.payload)))
        entries.sort(key=WINDOW_ORDER)
        return [entry[2] for entry in entries]

    def _read(self, driver: Any, values: dict[str, Any]) -> tuple[Any, list[tuple[Any, ...]]]:
        """The last row read (`None`: no rows) and the window's entries `(part, part_order,
        position, token_count, event)` in window order, each event built while the server still
        sends the rows after it."""
        head = None
        entries = []
        session_id = values["sid"]
        for row in self._window.stream(driver.cursor(), values, WINDOW_CHUNK):
            head = row  # every row carries the session's head columns
            # what the window needs of the row, not the row: kept, its payloads would stay
            # alive too, and the garbage collector's passes grow with them
            entries.append((row.part, row.part_order, row.position, row.token_count, _event(session_id, row)))
        entries.sort(key=WINDOW_ORDER)
        return head, entries

    def stats(self, session_id: str) -> WindowStats | None:
        with self._autocommit() as driver:
            found = self._window_head.rows(driver.cursor(), {"sid": session_id})
        return stats_of(found[0]) if found else None

    def fill_token_counts(self, session_id: str, counter: TokenCounter) -> int:
        """Count the window's uncounted events outside any transaction, then store the counts
        and the window's token stats under the session row lock."""
        query = (
            statements.live_session_events(session_id)
            .add_columns(ledger.c.position, ledger.c.event_id, ledger.c.payload)
            .where(statements.IN_WINDOW, ledger.c.token_count.is_(None))
        )
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
        if not rows:
            return 0
        counts = [
            {"sid": session_id, "pos": r.position, "count": counter(format_event(
                event_from_payload(session_id, r.event_id, r.payload)))}
            for r in rows
        ]  # fmt: skip
        with self._writer.begin() as conn:
            if locked_head(conn, session_id) is None:
                return 0
            conn.execute(
                ledger.update()
                .where(
                    ledger.c.session_id == sa.bindparam("sid"),
                    ledger.c.position == sa.bindparam("pos"),
                    ledger.c.token_count.is_(None),
                )
                .values(token_count=sa.bindparam("count")),
                counts,
            )
            tokens, uncounted = conn.execute(
                statements.live_session_events(session_id)
                .add_columns(
                    sa.func.coalesce(sa.func.sum(ledger.c.token_count), 0),
                    sa.func.count() - sa.func.count(ledger.c.token_count),
                )
                .where(statements.IN_WINDOW)
            ).one()
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(window_tokens=tokens, window_uncounted=uncounted)
            )
        return len(counts)
