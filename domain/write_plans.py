"""What an append batch and a compaction add to a session's ledger, planned here once: a backend
reads what a plan needs, under its own locks, and writes what the plan says.

The event id rule: an id is taken in its session by the first record that carries it, for good.
Archived, summarized away, rewound or erased, that record stays in the ledger with its id. An
append of a taken id is a duplicate and writes nothing; inside one batch, the first use takes the
id. A compaction's new events must carry ids that are neither taken nor repeated in its result,
and its window names each event once (`ValueError`, and nothing is written).

The conditional append rule (`version_check`): a draft with an `expected_version` is appended
only while its session is at that version, else it is the `CONFLICT` outcome.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from sessionledger.domain.append_outcomes import AppendOutcome
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.records import (
    ADAPTER_KINDS,
    Draft,
    Kind,
    LedgerRecord,
    event_draft,
    window_compaction_draft,
)
from sessionledger.domain.sessions import split_state_delta
from sessionledger.domain.window import Window, WindowStats
from sessionledger.domain.window_stats import stats_after_appends

if TYPE_CHECKING:
    from sessionledger.domain.compaction import CompactionResult


class LedgerHead(NamedTuple):
    """A session's chain head: its last record's position and row hash, and the session's version."""

    position: int
    hash: str
    version: int

    @classmethod
    def of(cls, record: LedgerRecord) -> LedgerHead:
        return cls(record.position, record.row_hash, record.version)

    def place(
        self, session_id: str, draft: Draft, version: int, recorded_at: datetime | None = None
    ) -> LedgerRecord:
        """`draft` as the record after this head, at `version`, stored at `recorded_at`."""
        return draft.place(session_id, self.position + 1, version, self.hash, recorded_at)


class Placed(NamedTuple):
    """A record placed on its session's chain, with the draft it came from (stored text, event)."""

    record: LedgerRecord
    draft: Draft


def appended_event(draft: Draft) -> SessionEvent:
    """The event an appended event draft holds (`ValueError` for any other draft)."""
    if draft.kind is not Kind.EVENT or draft.event is None:
        raise ValueError(f"only event drafts can be appended here, got {draft.kind}")
    return draft.event


def appended_session(draft: Draft) -> str:
    """The session an appended draft goes to: its event's, or an adapter draft's own
    (`ValueError` for a draft that is neither: only those two are appended)."""
    if draft.kind in ADAPTER_KINDS and draft.session_id is not None:
        return draft.session_id
    return appended_event(draft).session_id


def version_check(draft: Draft, version: int) -> AppendOutcome | None:
    """`CONFLICT` when the draft is a conditional append (`expected_version`) and its session is
    at another `version`, else `None` (the append goes on). A conflict stores nothing, and a
    tally counts nothing of it (`Tally.of_append`). It comes before the event id rule (a stale
    append of a stored id is a conflict too) and after the session's existence (`NO_SESSION`).
    Every backend asks this, with a version read under its write's own lock or transaction; in
    a batch, at the version the batch's earlier events left."""
    expected = draft.expected_version
    return None if expected is None or expected == version else AppendOutcome.CONFLICT


# --- batch appends ------------------------------------------------------------------------------


@dataclass(slots=True)
class BatchSession:
    """A live session as a batch append finds it and as it leaves it: its chain head, window
    stats and session-scoped state (`app_name` and `user_id` say where its shared state goes)."""

    head: LedgerHead
    stats: WindowStats
    state: dict[str, Any]
    app_name: str
    user_id: str

    def copy(self) -> BatchSession:
        """A copy a plan can move (its state copied too); built directly, as `dataclasses.replace`
        cost a one-entry append's plan a quarter of its time."""
        return BatchSession(self.head, self.stats, dict(self.state), self.app_name, self.user_id)


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """One outcome per draft; the records to write, in batch order; each session appended to, as
    the batch leaves it (by id); and the app and user state deltas to merge, folded in order."""

    outcomes: list[AppendOutcome]
    appended: list[Placed]
    sessions: dict[str, BatchSession]
    app_states: dict[str, dict[str, Any]]
    user_states: dict[tuple[str, str], dict[str, Any]]


def batch_keys(drafts: Iterable[Draft]) -> list[tuple[str, str]]:
    """The `(session id, event id)` pairs of a batch's events (`ValueError` for a draft that is
    neither an event's nor an adapter's)."""
    return [
        (event.session_id, event.id)
        for event in (appended_event(draft) for draft in drafts if draft.kind not in ADAPTER_KINDS)
    ]


def batch_session_ids(drafts: Iterable[Draft]) -> list[str]:
    """The sessions a batch appends to, in id order (the order a backend locks them in)."""
    return sorted({appended_session(draft) for draft in drafts})


def plan_batch(
    drafts: Sequence[Draft],
    sessions: Mapping[str, BatchSession],
    taken: Container[tuple[str, str]],
    recorded_at: datetime | None = None,
) -> BatchPlan:
    """The drafts appended in order: dense positions, versions, hashes, window stats and state per
    session. `sessions` holds the batch's live sessions (an event of any other is `NO_SESSION`;
    one whose `version_check` fails is `CONFLICT`);
    `taken` the `(session id, event id)` pairs of the batch its ledger already holds.

    An adapter's draft (`records.ADAPTER_KINDS`: an entry, a forget) goes on its session's chain
    at the session's current version: it is no event, so it takes no event id, moves neither
    the event version nor the window, and its outcome is `STORED` (or `NO_SESSION`)."""
    live = {sid: session.copy() for sid, session in sessions.items()}
    grown: dict[str, list[SessionEvent]] = {}  # each session's appended events, for its stats
    touched: set[str] = set()
    first_uses: set[tuple[str, str]] = set()
    outcomes: list[AppendOutcome] = []
    appended: list[Placed] = []
    app_states: dict[str, dict[str, Any]] = {}
    user_states: dict[tuple[str, str], dict[str, Any]] = {}
    for draft in drafts:
        if draft.kind in ADAPTER_KINDS:
            sid = appended_session(draft)
            session = live.get(sid)
            if session is None:
                outcomes.append(AppendOutcome.NO_SESSION)
                continue
            record = session.head.place(sid, draft, session.head.version, recorded_at)
            session.head = LedgerHead.of(record)
            touched.add(sid)
            appended.append(Placed(record, draft))
            outcomes.append(AppendOutcome.STORED)
            continue
        event = appended_event(draft)
        sid = event.session_id
        session = live.get(sid)
        if session is None:
            outcomes.append(AppendOutcome.NO_SESSION)
            continue
        conflict = version_check(draft, session.head.version)
        if conflict is not None:
            outcomes.append(conflict)
            continue
        key = (sid, event.id)
        if key in taken or key in first_uses:
            outcomes.append(AppendOutcome.DUPLICATE)
            continue
        first_uses.add(key)
        record = session.head.place(sid, draft, session.head.version + 1, recorded_at)
        session.head = LedgerHead.of(record)
        grown.setdefault(sid, []).append(event)
        scopes = split_state_delta(event.state_delta)
        session.state.update(scopes.session)
        if scopes.app:
            app_states.setdefault(session.app_name, {}).update(scopes.app)
        if scopes.user:
            user_states.setdefault((session.app_name, session.user_id), {}).update(scopes.user)
        appended.append(Placed(record, draft))
        outcomes.append(AppendOutcome.STORED)
    for sid, events_appended in grown.items():
        live[sid].stats = stats_after_appends(live[sid].stats, events_appended)
    touched.update(grown)
    return BatchPlan(outcomes, appended, {sid: live[sid] for sid in sorted(touched)}, app_states, user_states)


# --- compaction writes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction writes: its new events, then its record, placed after the locked head
    at the new version (`written`); the window prefix it leaves, as positions and as each event
    with its token count as read (`None` for a new event); the head after it; and whether every
    event it kept came with its count (the new window's stats are then known from the plan)."""

    written: tuple[Placed, ...]
    window: tuple[int, ...]
    prefix: tuple[tuple[SessionEvent, int | None], ...]
    head: LedgerHead
    counted: bool

    @property
    def record(self) -> LedgerRecord:
        """The compaction record itself."""
        return self.written[-1].record

    @property
    def new_event_ids(self) -> list[str]:
        return [placed.draft.event_id or "" for placed in self.written[:-1]]


def plan_compaction(
    read: Window,
    result: CompactionResult,
    head: LedgerHead,
    *,
    at: datetime,
    source: str,
    taken: Container[str],
) -> CompactionPlan:
    """The compaction of the window `read` into `result.compacted`, written after `head` (the
    session's, under its lock). `taken` holds the event ids the session's ledger already has; a
    backend whose unique index keeps the rule may pass none and, when the index refuses the
    write, call `require_new_event_ids` with the ids it found taken."""
    ids: set[str] = set()
    for event in result.compacted:
        if event.id in ids:
            raise ValueError(f"a compaction result names event id {event.id!r} twice")
        ids.add(event.id)
    known = dict(zip((event.id for event in read.events), read.positions, strict=True))
    require_new_event_ids((event.id for event in result.compacted if event.id not in known), taken)
    counts = dict(zip(read.positions, read.token_counts, strict=True)) if read.token_counts else {}
    session_id = read.events[0].session_id
    version = head.version + 1
    written: list[Placed] = []
    window: list[int] = []
    prefix: list[tuple[SessionEvent, int | None]] = []
    for event in result.compacted:
        position = known.get(event.id)
        if position is None:
            draft = event_draft(event.with_archived(False))
            record = head.place(session_id, draft, version, at)
            head = LedgerHead.of(record)
            written.append(Placed(record, draft))
            position = record.position
        window.append(position)
        prefix.append((event, counts.get(position)))
    draft = window_compaction_draft(read, window, at=at, source=source, tokens_saved=int(result.tokens_saved))
    record = head.place(session_id, draft, version, at)
    written.append(Placed(record, draft))
    counted = bool(counts) and all(counts[p] is not None for p in window if p in counts)
    return CompactionPlan(tuple(written), tuple(window), tuple(prefix), LedgerHead.of(record), counted)


def require_new_event_ids(ids: Iterable[str], taken: Container[str]) -> None:
    """The event id rule for a compaction's new events: `ValueError` for the first one taken."""
    for event_id in ids:
        if event_id in taken:
            raise ValueError(
                f"a compaction result re-uses event id {event_id!r}, already in the session's ledger"
            )
