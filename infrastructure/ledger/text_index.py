"""The keyword index: which rows of a session may match a keyword search, so that a rare or absent
keyword reads those rows instead of the session's whole history.

One expression, `SEARCHABLE_TEXT` (the event's lowercased message text), is what the scan matches
and what both indexes hold, and the index only ever narrows: every row it names is read and checked
against the filter's exact conditions, as the scan checks it. A search through the index therefore
returns what the scan returns, page for page, by construction (tests/integration/test_text_index.py
compares them on random histories).

- SQLite: `ledger_fts`, a contentless FTS5 table with the `trigram` tokenizer, keyed by the row's
  `global_position` (its rowid), kept by triggers in the writing transaction itself (erasure
  included: nulling a payload deletes its text from the table).
- PostgreSQL: `ledger_text (session_id, position, text)` with a GIN index over `(session_id, text
  gin_trgm_ops)` (pg_trgm and btree_gin: the session's own postings are intersected inside the
  index, so a keyword common elsewhere costs a small session nothing). It is filled *behind* the
  writes, by `TextIndexer`, in batches: a trigram GIN entry per distinct trigram of a ~1 KB text
  made a per-row index cost 12-16x the COPY of the row itself (measured on ShareGPT rows: COPY
  48,000-50,000 rows/s with no index, 3,100-4,200 with the GIN on the ledger, 380-490 with
  `fastupdate=off`), far past the write budget of the append and the ingest. Each session's
  rows are indexed up to a mark (the highest indexed position); a search takes the index's
  candidates up to the mark and every row after it, so a session the indexer has not reached yet
  is answered exactly, only slower. The indexer rests while the ledger grows and catches up at
  full speed when it is idle (`index_pacing.py`), so that it takes the writers' spare capacity,
  not theirs.
  Erasure deletes the session's `ledger_text` rows in its own transaction.
- MariaDB and MySQL: no index (their full-text parsers match words, not substrings); the scan.

`events.py` first walks a long session's first positions in log order (a common keyword settles
its page there), then asks `candidates`, which answers `None` (the scan) when a term is under
three characters (no trigram), when the index names more than `MAX_CANDIDATES` rows (reading
every match of a common keyword costs more the longer the history, where the ordered walk stops
at the page), or when the indexer is more than that many rows behind the session's head.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.filters import EventFilter, MatchMode
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.ledger.index_pacing import Batch, Pacing
from sessionledger.infrastructure.ledger.schema import ledger, sessions

__all__ = [
    "FTS_TABLE",
    "INDEXED_TABLES",
    "MATCHED_TEXT",
    "MAX_CANDIDATES",
    "MIN_TERM",
    "SEARCHABLE_TEXT",
    "TextIndexer",
    "candidates",
    "catch_up",
    "erasure_lock",
    "index_terms",
    "ledger_text",
    "like_term",
    "required_literal",
    "sigma_terms",
]

log = logging.getLogger(__name__)

MIN_TERM = 3
"""A trigram index can narrow a search only by terms of at least three characters."""
MAX_CANDIDATES = 2_000
"""Above this many candidate rows in one session the ordered scan is the cheaper plan: reading every
match of a common keyword through an index took 15.4x the ordered walk on a 100,000-event session
(the first attempt at this index), and 'python' (1 event in 20) 3.5x in bench_agents here."""
CATCH_UP_ROWS = 500
"""Rows `catch_up` indexes per transaction: the grain of the indexer's duty cycle (`Pacing`), since
a batch runs whole before any rest (500 ~1 KB rows: a fraction of a second on a quiet machine)."""
FTS_TABLE = "ledger_fts"
INDEXED_TABLES = frozenset({"ledger_text", FTS_TABLE})
"""Tables of the keyword index, which the ledger's declared schema leaves out: each exists on one
dialect only (FTS5's own shadow tables start with `ledger_fts_`)."""

_MESSAGE_TEXT = sa.type_coerce(ledger.c.payload, sa.JSON)[("message", "text")].as_string()

SEARCHABLE_TEXT: sa.ColumnElement[str] = sa.func.lower(_MESSAGE_TEXT)
"""The text the indexes hold: the message text, lowercased by the database."""

MATCHED_TEXT: sa.ColumnElement[str] = sa.func.lower(sa.func.replace(_MESSAGE_TEXT, "\u0130", "i\u0307"))
"""The text a keyword search matches: the message text lowercased as Python lowercases it (the
rule is `keyword in text.lower()`). SQLite's `lower` is Python's own (`engine.py`); PostgreSQL's
and MariaDB's map `İ` to `i`, where Python writes `i` and a combining dot above, so `İ` is
replaced first. The other difference, Python's final `ς` where the database writes `σ`, is left
to a check in Python (`sigma_terms`)."""

ledger_text = sa.Table(
    "ledger_text",
    sa.MetaData(),
    sa.Column("session_id", sa.Text, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("text", sa.Text),
)
"""PostgreSQL only: each indexed event row's `SEARCHABLE_TEXT` (NULL for one without text), and the
last row of each `catch_up` batch whatever its kind: the highest position is the session's mark."""

_fts = sa.table(FTS_TABLE, sa.column("rowid", sa.Integer))


def index_terms(f: EventFilter) -> tuple[list[str], bool] | None:
    """The terms that narrow a search and whether all of them must occur (`True`) or any; `None`
    when the index cannot narrow it. Required terms (`keyword`, `keywords` under ALL, a literal
    every match of `pattern` holds) narrow by those of at least three characters, the others
    left to the exact re-check; alternatives (`keywords` under ANY) narrow only when every one
    has a trigram."""
    required = [] if f.keyword is None else [f.keyword]
    literal = None if f.pattern is None else required_literal(f.pattern)
    if literal is not None:
        required.append(literal.lower())
    alternatives: list[str] = []
    if f.keywords is not None and f.match_mode is MatchMode.ALL:
        required += f.keywords
    elif f.keywords is not None:
        alternatives = list(f.keywords)
    usable = [term for term in required if len(term) >= MIN_TERM]
    if usable:
        return usable, True
    if alternatives and all(len(term) >= MIN_TERM for term in alternatives):
        return alternatives, False
    return None


def required_literal(pattern: re.Pattern[str]) -> str | None:
    """The longest run of ASCII literal characters at the top level of `pattern` (so in every
    match of it), of at least `MIN_TERM` characters; `None` when it has none. Whatever the
    pattern's case flags, a text holding the run holds it lowercased once lowercased, so the
    index narrows a regular expression as it narrows a keyword (ASCII only: Python's and the
    database's lowercasing agree there). Ignoring case, `i`, `k` and `s` end a run: Unicode
    matching lets them match `İ`/`ı`, the Kelvin sign and the long s, which lowercase elsewhere."""
    from re import _constants, _parser  # type: ignore[attr-defined]  # the parser `re` compiles with

    try:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
    except (re.error, RecursionError):
        return None
    unicode_case = bool(pattern.flags & re.IGNORECASE) and not pattern.flags & re.ASCII
    best, run = "", ""
    for op, argument in [*parsed, (None, None)]:
        if op is _constants.LITERAL and argument < 128 and not (unicode_case and chr(argument) in "iksIKS"):
            run += chr(argument)
            continue
        best, run = max(best, run, key=len), ""
    return best if len(best) >= MIN_TERM else None


def like_term(term: str) -> str:
    """A LIKE pattern matching `term` literally anywhere (`\\` escapes `%`, `_` and itself), but
    for a final sigma `ς`, which matches any one character: the database may have written `σ`
    where Python writes `ς` (a search with a sigma is checked again in Python: `sigma_terms`)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped.replace('ς', '_')}%"


def sigma_terms(f: EventFilter) -> bool:
    """Whether a keyword of `f` holds a Greek sigma: Python lowercases `Σ` at a word's end as `ς`,
    a database as `σ`, so SQL cannot tell such a keyword's matches exactly; they are read
    loosely (`like_term`) and checked in Python, as a `pattern` is."""
    terms = ([] if f.keyword is None else [f.keyword]) + list(f.keywords or ())
    return any("σ" in term or "ς" in term for term in terms)


def _phrase(term: str) -> str:
    """An FTS5 string: a trigram phrase matches its text as a substring, case-insensitively."""
    return '"' + term.replace('"', '""') + '"'


def candidates(conn: sa.Connection, session_id: str, f: EventFilter) -> list[int] | None:
    """Positions of the session's rows that may match `f`'s keywords (a superset of the matches),
    or `None` when the scan is the better or the only plan (see the module docstring)."""
    terms = index_terms(f)
    if terms is None or conn.dialect.name == "mysql":  # MariaDB and MySQL: no index (0006)
        return None
    words, every = terms
    if conn.dialect.name == "sqlite":
        query = " AND ".join(map(_phrase, words)) if every else " OR ".join(map(_phrase, words))
        found = (
            sa.select(ledger.c.position)
            .select_from(_fts.join(ledger, ledger.c.global_position == _fts.c.rowid))
            .where(sa.text(f"{FTS_TABLE} MATCH :fts_query"), ledger.c.session_id == session_id)
            .limit(MAX_CANDIDATES + 1)
        )
        positions = list(conn.execute(found, {"fts_query": query}).scalars())
        return None if len(positions) > MAX_CANDIDATES else positions
    mark = sa.select(sa.func.coalesce(sa.func.max(ledger_text.c.position), 0)).where(
        ledger_text.c.session_id == session_id
    )
    marked = conn.execute(
        sa.select(sessions.c.head_position, mark.scalar_subquery()).where(sessions.c.id == session_id)
    ).first()
    if marked is None:
        return None
    head, indexed_to = marked
    behind = head - indexed_to
    if behind > MAX_CANDIDATES:
        return None
    # `ledger_text` holds `SEARCHABLE_TEXT`, where PostgreSQL lowercased `İ` to `i` without
    # Python's combining dot: the dot matches anything there (the rows are checked exactly after)
    loose = [like_term(word).replace("\u0307", "%") for word in words]
    matches = [ledger_text.c.text.like(term, escape="\\") for term in loose]
    indexed = (
        sa.select(ledger_text.c.position)
        .where(ledger_text.c.session_id == session_id, sa.and_(*matches) if every else sa.or_(*matches))
        .limit(MAX_CANDIDATES + 1)
    )
    positions = list(conn.execute(indexed).scalars())
    if len(positions) + behind > MAX_CANDIDATES:
        return None
    return positions + list(range(indexed_to + 1, head + 1))


ERASURE_LOCKS = 0x5E55
"""The class of the transaction-level advisory locks of `erasure_lock`."""


def erasure_lock(session_id: str, shared: bool) -> sa.ColumnElement[Any]:
    """`pg_advisory_xact_lock[_shared]` on the session id: an erasure takes it exclusively, an
    indexer of that session shared."""
    lock = sa.func.pg_advisory_xact_lock_shared if shared else sa.func.pg_advisory_xact_lock
    return lock(sa.literal(ERASURE_LOCKS, sa.Integer), sa.func.hashtext(session_id))


def catch_up(engine: sa.Engine, session_id: str, rows: int = CATCH_UP_ROWS) -> Batch:
    """Index up to `rows` of the session's rows after its mark, in one transaction; the number
    indexed (0: caught up, deleted or unknown) and the number still behind. It holds
    `erasure_lock` shared, so an erasure (which takes it exclusively) runs wholly before or after
    and never leaves text behind, while appends, which never take it, go on (the session row's
    lock made each append wait for the index). Two indexers of one session insert the same rows,
    the second's skipped by the key.

    Only event rows go in (a search reads no other), and the batch's last row whatever its kind,
    which is the session's new mark: a LangGraph thread's checkpoints and writes, most of its
    rows and none of them searchable, had each cost a row and a GIN entry (a thread of 5,000
    checkpoints: 5,001 rows indexed in 345-378 ms, now 11 in 223-232 ms, mostly the batches'
    own statements)."""
    from sqlalchemy.dialects.postgresql import insert

    with engine.begin() as conn:
        conn.execute(sa.select(erasure_lock(session_id, shared=True)))
        head = conn.execute(
            sa.select(sessions.c.head_position).where(
                sessions.c.id == session_id, sessions.c.deleted_at.is_(None)
            )
        ).scalar()
        if head is None:
            return Batch(0, 0)
        mark = conn.execute(
            sa.select(sa.func.coalesce(sa.func.max(ledger_text.c.position), 0)).where(
                ledger_text.c.session_id == session_id
            )
        ).scalar_one()
        upto = min(head, mark + rows)
        if upto <= mark:
            return Batch(0, 0)
        source = sa.select(ledger.c.session_id, ledger.c.position, SEARCHABLE_TEXT).where(
            ledger.c.session_id == session_id,
            ledger.c.position > mark,
            ledger.c.position <= upto,
            sa.or_(ledger.c.kind == Kind.EVENT.value, ledger.c.position == upto),
        )
        conn.execute(
            insert(ledger_text)
            .from_select(["session_id", "position", "text"], source)
            .on_conflict_do_nothing()
        )
        return Batch(int(upto - mark), int(head - upto))


def _behind(conn: sa.Connection, limit: int) -> Sequence[str]:
    """Live sessions whose head is past their mark, at most `limit`."""
    mark = (
        sa.select(sa.func.coalesce(sa.func.max(ledger_text.c.position), 0))
        .where(ledger_text.c.session_id == sessions.c.id)
        .scalar_subquery()
    )
    return list(
        conn.execute(
            sa.select(sessions.c.id)
            .where(sessions.c.deleted_at.is_(None), sessions.c.head_position > mark)
            .limit(limit)
        ).scalars()
    )


INDEXER_LOCK = 0x5E551071E7E8
"""pg_advisory_lock key: one process's indexer works at a time (others would redo its rows)."""


class _LedgerGrowth:
    """Called: whether the ledger grew since the last call (or since it was made), wherever the
    rows were written; one probe of the ledger's primary key for its highest global position."""

    def __init__(self, conn: sa.Connection) -> None:
        self._conn = conn
        self._end = self._look()

    def __call__(self) -> bool:
        seen, self._end = self._end, self._look()
        return self._end > seen

    def _look(self) -> int:
        end = self._conn.execute(sa.select(sa.func.coalesce(sa.func.max(ledger.c.global_position), 0)))
        position = int(end.scalar_one())
        self._conn.commit()
        return position


class TextIndexer:
    """PostgreSQL: a daemon thread that keeps `ledger_text` up with the ledger, behind the writes.

    Every `interval` seconds it looks for live sessions whose head is past their mark (wherever
    they were written: this process, a worker, an async append) and catches each up, in
    transactions of `CATCH_UP_ROWS`, paced (`index_pacing.Pacing`) so that it rests while the
    ledger grows and runs at full speed when it is idle. Polling rather than being told by each
    write path keeps every writer as it was; the look costs one index probe per live session.
    Searches never wait for it: they read the index up to the mark and the rows after it."""

    THREAD = "sessionledger-text-index"

    def __init__(self, engine: sa.Engine, interval: float = 0.5, pacing: Pacing | None = None) -> None:
        self._engine = engine
        self._interval = interval
        self._stop = threading.Event()
        self._pacing = Pacing(self._stop.wait) if pacing is None else pacing
        self._thread: threading.Thread | None = None
        self._pid = 0

    def start(self) -> None:
        """Start the thread in this process (once; a process forked from this one has none)."""
        if self._thread is not None and self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.THREAD, daemon=True)
        self._thread.start()

    def run_once(self, wait: bool = False, paced: bool = True) -> int:
        """Catch every session up under the indexers' advisory lock (taken at once or, with `wait`,
        when the indexer holding it is done), resting while the ledger grows unless not `paced`;
        rows indexed."""
        total = 0
        with self._engine.connect() as conn:
            lock = sa.func.pg_advisory_lock if wait else sa.func.pg_try_advisory_lock
            conn.execute(sa.text("SET LOCAL statement_timeout = 0"))  # the wait is no request
            locked = conn.execute(sa.select(lock(INDEXER_LOCK))).scalar()
            conn.commit()
            if locked is False:
                return 0
            try:
                pacing = self._pacing if paced else Pacing(self._stop.wait, rest=0)
                grew = _LedgerGrowth(conn)
                while not self._stop.is_set():
                    pending = _behind(conn, 100)
                    conn.commit()
                    if not pending:
                        break
                    for session_id in pending:
                        batch = functools.partial(catch_up, self._engine, session_id)
                        while (done := pacing.run(batch, grew)) and not self._stop.is_set():
                            total += done
            finally:
                conn.execute(sa.select(sa.func.pg_advisory_unlock(INDEXER_LOCK)))
                conn.commit()
        return total

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._pid == os.getpid():
            self._thread.join(timeout=10)
        self._thread = None

    def _run(self) -> None:
        """A pass every `interval`, the first one `interval` after the start: a short-lived
        process (a reading command) opens and closes its ledger without a pass."""
        while not self._stop.wait(self._interval):
            try:
                self.run_once()
            except sa.exc.SQLAlchemyError as error:  # the database away or closing: try again later
                log.warning("text index: %s", error)
