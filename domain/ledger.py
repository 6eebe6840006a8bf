"""The ledger's rules, shared by every backend: records, the hash chain, window stats and replay.

A session's ledger is a dense sequence of records (positions 1..n). Each record's content is its
canonical JSON payload; the hash chain covers the content and the record's place, so an edit or a
deletion anywhere shows up in `chain_problems`. The active window is a projection of the records:
`replay` rebuilds it from the records alone, and the SQL and in-memory windows must equal it.

The window rule (docs/architecture.md "The ledger"): the window is an ordered *prefix* of
positions written by the last compaction or rewind, followed by every event row after the
*base* position that is neither in the prefix nor hidden by a rewind. Archived events are the
event rows in neither the window nor the hidden set. Appends therefore never touch the prefix.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from json.encoder import encode_basestring
from typing import Any

import orjson
from sessionledger.domain.codec import event_from_payload, event_to_payload, format_timestamp
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.mappings import EMPTY, FrozenDict
from sessionledger.domain.ports import Window, WindowStats
from sessionledger.domain.sessions import Session, split_state_delta, strip_temp
from sessionledger.domain.turns import format_message_bytes, starts_turn, utf8_length

GENESIS_HASH = "0" * 64
"""The `prev_hash` of a session's first record."""


class Kind(StrEnum):
    """What a ledger record says happened."""

    CREATED = "created"
    EVENT = "event"
    COMPACTION = "compaction"
    REWIND = "rewind"
    ERASURE = "erasure"


ERASABLE = frozenset({Kind.CREATED, Kind.EVENT, Kind.REWIND})
"""The kinds whose payload a session's deletion erases (messages, metadata, state); a compaction's
payload (positions) and the erasure's own (a reason) stay readable."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""One encoder for every record: `json.dumps` with options builds a new one per call."""


def canonical(obj: Any) -> str:
    """The one JSON text a value hashes and is stored as: sorted keys, no spaces, no NaN.

    The text is `json`'s (`_CANONICAL`), which every stored hash was computed over. orjson writes
    the same text ten times faster (1 KB message: 12 -> 1 us) for every value but floats, whose
    shortest form it spells differently (`1e16`, not `1e+16`): a value holding none is encoded by
    orjson, any other (and anything orjson refuses: big integers, lone surrogates, non-str keys,
    other types) by `json` (tests/unit/test_canonical_json.py holds the two to the same text).
    """
    try:
        if not _holds_float(obj):
            return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:
        pass
    try:
        return _CANONICAL.encode(obj)
    except (TypeError, ValueError) as error:
        raise ValueError(f"not JSON-serializable: {error}") from None


_NO_FLOAT = {str, int, bool, type(None)}
FLOAT_SEARCH_LIMIT = 100_000
"""Values `_holds_float` looks at before it gives up (and says yes: `json` then writes the text)."""


def _holds_float(value: Any) -> bool:
    """Whether a float is anywhere in `value` (dict values and list or tuple items, nested); also
    yes past `FLOAT_SEARCH_LIMIT` values, which bounds the search of a value that contains itself."""
    pending = [value]
    pop, extend = pending.pop, pending.extend
    for _ in range(FLOAT_SEARCH_LIMIT):
        if not pending:
            return False
        item = pop()
        if type(item) in _NO_FLOAT:
            continue
        if isinstance(item, dict):
            extend(item.values())
        elif isinstance(item, list | tuple):
            extend(item)
        elif isinstance(item, float):
            return True
    return True


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def row_hash(
    prev_hash: str,
    session_id: str,
    position: int,
    version: int,
    event_id: str | None,
    kind: str,
    occurred_at: datetime,
    content_hash: str,
    recorded_at: datetime | None = None,
) -> str:
    """`sha256(prev_hash + "\\n" + canonical(header))`: chains a record to its predecessor.

    The header is `canonical({session_id, position, version, event_id, kind, occurred_at,
    recorded_at, content_hash})`, written out directly (keys in sorted order): it is hashed on
    every append. Without `recorded_at` it is the header of the records written before the
    recording time was hashed (docs/architecture.md "Hash chain"), which still verify.
    """
    occurred = format_timestamp(occurred_at)  # first: an event's time was just formatted (its payload)
    recorded = "" if recorded_at is None else f'"recorded_at":"{_recorded_text(recorded_at)}",'
    header = (
        f'{{"content_hash":"{content_hash}","event_id":{_json_string(event_id)},"kind":"{kind}",'
        f'"occurred_at":"{occurred}","position":{int(position)},{recorded}'
        f'"session_id":{_json_string(session_id)},"version":{int(version)}}}'
    )
    return sha256_hex(prev_hash + "\n" + header)


_recorded_text = functools.lru_cache(maxsize=64)(format_timestamp)
"""`format_timestamp` of a `recorded_at`: a write places all its records at one time (a batch:
thousands), formatted once."""


def covers_recorded_at(record: LedgerRecord, position: int | None = None) -> bool | None:
    """Whether the record's row hash, recomputed at `position` (its own by default), covers its
    `recorded_at` (`True`: every record the ledger writes now), is the older header without it
    (`False`), or matches neither (`None`: the record is not what the ledger wrote there).

    An edited `recorded_at` fails both: the row hash was computed over the old time, and it is
    not the hash of the header without one.
    """
    at = record.position if position is None else position
    fields = (record.prev_hash, record.session_id, at, record.version, record.event_id, record.kind,
              record.occurred_at, record.content_hash)  # fmt: skip
    if record.recorded_at is not None and record.row_hash == row_hash(*fields, record.recorded_at):
        return True
    if record.row_hash == row_hash(*fields):
        return False
    return None


def _json_string(value: str | None) -> str:
    """A string (or None) as canonical JSON, exactly as `canonical` writes it inside a document
    (the encoder's own string function, without its per-call dispatch: it runs per record)."""
    return "null" if value is None else encode_basestring(value)


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """One ledger row. `payload` is `None` once erased; `content_hash` stays so the chain verifies."""

    session_id: str
    position: int
    version: int
    kind: Kind
    event_id: str | None
    occurred_at: datetime
    payload: Mapping[str, Any] | None
    content_hash: str
    prev_hash: str
    row_hash: str
    event_type: str | None = None
    branch: str | None = None
    synthetic: bool = False
    recorded_at: datetime | None = None
    token_count: int | None = None
    global_position: int | None = None

    @classmethod
    def _trusted(
        cls,
        session_id: str,
        position: int,
        version: int,
        kind: Kind,
        event_id: str | None,
        occurred_at: datetime,
        payload: Mapping[str, Any] | None,
        content_hash: str,
        prev_hash: str,
        row_hash: str,
        event_type: str | None = None,
        branch: str | None = None,
        synthetic: bool = False,
        recorded_at: datetime | None = None,
        token_count: int | None = None,
        global_position: int | None = None,
    ) -> LedgerRecord:
        """The record, built as `SessionEvent._trusted` builds an event: its fields set on a
        writable twin, which is then relabelled. A record is built for every appended event and
        for every record read (a verify: millions), and the frozen dataclass's own constructor
        costs five times as much (one `object.__setattr__` per field)."""
        record: Any = _WritableRecord()  # `Any`: the twin declares its slots, not their types
        record.session_id = session_id
        record.position = position
        record.version = version
        record.kind = kind
        record.event_id = event_id
        record.occurred_at = occurred_at
        record.payload = payload
        record.content_hash = content_hash
        record.prev_hash = prev_hash
        record.row_hash = row_hash
        record.event_type = event_type
        record.branch = branch
        record.synthetic = synthetic
        record.recorded_at = recorded_at
        record.token_count = token_count
        record.global_position = global_position
        record.__class__ = cls  # a relabel: both classes share one slot layout
        return record  # type: ignore[no-any-return]  # now a LedgerRecord (the line above)

    def event(self, archived: bool = False) -> SessionEvent:
        """The session event an `event` record holds (`ValueError` when it was erased)."""
        if self.kind is not Kind.EVENT or self.payload is None:
            raise ValueError(f"record {self.position} of {self.session_id} holds no readable event")
        return event_from_payload(self.session_id, self.event_id or "", self.payload, archived)


class _WritableRecord:
    """The slot layout of `LedgerRecord` without the frozen guard, for `LedgerRecord._trusted`."""

    __slots__ = LedgerRecord.__slots__


@dataclass(frozen=True, slots=True)
class Draft:
    """A record's content before its place in a session's chain is known.

    Built once (payload, canonical text and content hash), then placed by the ledger that holds
    the session head: the text is what the database stores, byte for byte.
    """

    kind: Kind
    occurred_at: datetime
    payload: dict[str, Any]
    text: str
    content_hash: str
    event: SessionEvent | None = None
    event_id: str | None = None
    event_type: str | None = None
    branch: str | None = None
    synthetic: bool = False
    expected_version: int | None = None
    """A conditional append: stored only while the session is at this event_version (else the
    CONFLICT outcome); `None` appends whatever the version."""

    @classmethod
    def _trusted(
        cls,
        kind: Kind,
        occurred_at: datetime,
        payload: dict[str, Any],
        text: str,
        content_hash: str,
        event: SessionEvent | None,
        event_id: str | None,
        event_type: str | None,
        branch: str | None,
        synthetic: bool,
    ) -> Draft:
        """The draft, built as `LedgerRecord._trusted` builds a record (one per appended event)."""
        draft: Any = _WritableDraft()  # as `record` in `LedgerRecord._trusted`
        draft.kind = kind
        draft.occurred_at = occurred_at
        draft.payload = payload
        draft.text = text
        draft.content_hash = content_hash
        draft.event = event
        draft.event_id = event_id
        draft.event_type = event_type
        draft.branch = branch
        draft.synthetic = synthetic
        draft.expected_version = None
        draft.__class__ = cls  # a relabel: both classes share one slot layout
        return draft  # type: ignore[no-any-return]  # now a Draft (the line above)

    @property
    def size(self) -> int:
        """The payload's size in utf-8 bytes (what the payload limit is checked against)."""
        return utf8_length(self.text)

    def place(
        self,
        session_id: str,
        position: int,
        version: int,
        prev_hash: str,
        recorded_at: datetime | None = None,
    ) -> LedgerRecord:
        """The record at `position` after `prev_hash`; the ledger stores it at `recorded_at`, which
        its row hash covers (every write path passes it)."""
        return LedgerRecord._trusted(
            session_id,
            position,
            version,
            self.kind,
            self.event_id,
            self.occurred_at,
            self.payload,
            self.content_hash,
            prev_hash,
            row_hash(
                prev_hash,
                session_id,
                position,
                version,
                self.event_id,
                self.kind,
                self.occurred_at,
                self.content_hash,
                recorded_at,
            ),
            self.event_type,
            self.branch,
            self.synthetic,
            recorded_at,
        )


class _WritableDraft:
    """The slot layout of `Draft` without the frozen guard, for `Draft._trusted`."""

    __slots__ = Draft.__slots__


def _draft(
    kind: Kind,
    occurred_at: datetime,
    payload: dict[str, Any],
    text: str | None = None,
    event: SessionEvent | None = None,
    event_id: str | None = None,
    event_type: str | None = None,
    branch: str | None = None,
    synthetic: bool = False,
) -> Draft:
    text = canonical(payload) if text is None else text
    return Draft._trusted(
        kind, occurred_at, payload, text, sha256_hex(text), event, event_id, event_type, branch, synthetic
    )


def created_draft(session: Session, state: Mapping[str, Any]) -> Draft:
    """The session's first record; `state` is the initial state without `temp:` keys (prefixes kept)."""
    payload = {
        "user_id": session.user_id,
        "app_name": session.app_name,
        "metadata": dict(session.metadata),
        "state": strip_temp(state),
        "created_at": format_timestamp(session.created_at),
        "expires_at": None if session.expires_at is None else format_timestamp(session.expires_at),
    }
    return _draft(Kind.CREATED, session.created_at, payload)


def event_draft(event: SessionEvent, payload: dict[str, Any] | None = None) -> Draft:
    """An appended event; `ValueError` when its metadata or state delta is not plain JSON.
    `payload`: the event's `event_to_payload`, when the caller has it already (`validated_event`)."""
    payload = event_to_payload(event) if payload is None else payload
    return _draft(
        Kind.EVENT,
        event.timestamp,
        payload,
        _strings_only_text(event, payload),
        event,
        event.id,
        event.message.type.value,
        event.branch,
        event.is_synthetic,
    )


def _strings_only_text(event: SessionEvent, payload: dict[str, Any]) -> str | None:
    """`canonical(payload)` without its search for floats, for an event with no metadata, state
    delta or tool lists (most chat messages): its payload holds nothing but strings and `None`,
    which orjson writes as `json` does; `None` for any other event (or text orjson refuses)."""
    message = event.message
    if (
        event.metadata
        or event.state_delta
        or message.metadata
        or message.tool_calls
        or message.tool_responses
    ):
        return None
    try:
        return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:
        return None


def compaction_draft(
    *,
    at: datetime,
    epoch: int,
    read_head: int,
    window: Sequence[int],
    archived: Sequence[int],
    source: str,
    tokens_saved: int,
) -> Draft:
    """A compaction: the window it wrote (positions in order) and what it archived.

    `epoch` is the window epoch the compaction replaced (one compaction per epoch); `read_head`
    the last position the compaction read: later events follow the new window.
    """
    payload = {
        "epoch": epoch,
        "read_head": read_head,
        "window": list(window),
        "archived": list(archived),
        "source": source,
        "tokens_saved": tokens_saved,
    }
    return _draft(Kind.COMPACTION, at, payload)


def window_compaction_draft(
    read: Window, window: Sequence[int], *, at: datetime, source: str, tokens_saved: int
) -> Draft:
    """The compaction of the window `read`: `window` (positions) replaces it, and every position
    it read but does not keep is archived."""
    kept = set(window)
    return compaction_draft(
        at=at,
        epoch=read.head.epoch,
        read_head=read.head.head_position,
        window=window,
        archived=[p for p in read.positions if p not in kept],
        source=source,
        tokens_saved=tokens_saved,
    )


def rewind_draft(
    *,
    at: datetime,
    before_invocation_id: str,
    hidden: Sequence[int],
    window: Sequence[int],
    state_delta: Mapping[str, Any],
) -> Draft:
    """A rewind: the events it hides and the window that remains (google-adk's rewind)."""
    payload = {
        "before_invocation_id": before_invocation_id,
        "hidden": list(hidden),
        "window": list(window),
        "state_delta": dict(state_delta),
    }
    return _draft(Kind.REWIND, at, payload)


def erasure_draft(*, at: datetime, reason: str) -> Draft:
    """The record that a session was deleted (its other payloads are erased with it)."""
    return _draft(Kind.ERASURE, at, {"reason": reason, "deleted_at": format_timestamp(at)})


# --- the window rule --------------------------------------------------------------------------


@dataclass(slots=True)
class WindowShape:
    """The window as positions: the ordered prefix, the base position and the hidden set."""

    prefix: list[int] = field(default_factory=list)
    base: int = 0
    hidden: set[int] = field(default_factory=set)

    def split(self, event_positions: Iterable[int]) -> tuple[list[int], list[int]]:
        """`(archived, window)` positions for the session's event rows (given by position)."""
        in_prefix = set(self.prefix)
        archived: list[int] = []
        tail: list[int] = []
        for position in event_positions:
            if position in self.hidden or position in in_prefix:
                continue
            (tail if position > self.base else archived).append(position)
        return archived, [*self.prefix, *tail]

    def compact(self, record: Mapping[str, Any]) -> None:
        self.prefix = list(record["window"])
        self.base = record["read_head"]

    def rewind(self, record: Mapping[str, Any], position: int) -> None:
        self.prefix = list(record["window"])
        self.base = position
        self.hidden.update(record["hidden"])


# --- window stats -------------------------------------------------------------------------------


def event_bytes(event: SessionEvent) -> int:
    """The byte size a window stat counts: utf-8 bytes of the one-line rendering (>= its tokens)."""
    return format_message_bytes(event.message)


EventMeasure = tuple[bool, int, int | None, bool]
"""What a window stat counts of one event: whether it starts a turn, its bytes, its token count
(`None`: not counted yet) and whether it is synthetic (a summary)."""


def event_measure(event: SessionEvent, token_count: int | None) -> EventMeasure:
    return starts_turn(event), event_bytes(event), token_count, event.is_synthetic


def window_stats(window: Iterable[tuple[SessionEvent, int | None]]) -> WindowStats:
    """The stats of a window given as `(event, token_count or None)` in window order."""
    return stats_of_measures(event_measure(event, token_count) for event, token_count in window)


def stats_of_measures(measures: Iterable[EventMeasure]) -> WindowStats:
    """The stats of a window given as its events' measures in window order (`verify --jobs`
    measures events where it reads them and ships only the measures)."""
    events = turns = size = tokens = uncounted = since_summary = 0
    for turn, event_size, token_count, synthetic in measures:
        events += 1
        turns += turn
        size += event_size
        if token_count is None:
            uncounted += 1
        else:
            tokens += token_count
        since_summary = 0 if synthetic else since_summary + 1
    return WindowStats(events, turns, size, tokens, uncounted, since_summary)


def stats_after_appends(stats: WindowStats, events: Iterable[SessionEvent]) -> WindowStats:
    """The stats once `events` (not yet counted) join the end of the window, in order: O(1) per
    event, with one `WindowStats` built for the lot."""
    appended, turns, size, since_summary = 0, stats.turns, stats.bytes, stats.events_since_summary
    for event in events:
        appended += 1
        turns += starts_turn(event)
        size += event_bytes(event)
        since_summary = 0 if event.is_synthetic else since_summary + 1
    return WindowStats(
        events=stats.events + appended,
        turns=turns,
        bytes=size,
        tokens=stats.tokens,
        uncounted=stats.uncounted + appended,
        events_since_summary=since_summary,
    )


# --- replay -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Projection:
    """A session as its records say it stood: the window, archived and hidden events, and state.

    Erased events (a deleted session replayed to before its deletion) keep their positions in
    `window_positions`/`archived_positions` but have no event in `window`/`archived`.
    """

    window: tuple[SessionEvent, ...]
    archived: tuple[SessionEvent, ...]
    hidden: tuple[int, ...]
    session_state: FrozenDict
    version: int
    window_positions: tuple[int, ...]
    archived_positions: tuple[int, ...]
    deleted: bool = False
    shape: WindowShape = field(default_factory=WindowShape)
    """The window rule's state: prefix, base and hidden positions."""
    epoch: int = 0
    """The window epoch: how many compactions and rewinds replaced the window."""


@dataclass(slots=True)
class ReplayPart:
    """What a run of consecutive records adds to a replay: its events (by position), the session
    state its records set (in order: a later part's keys win), the records that shape the window
    (compactions and rewinds, in order), its last version, whether it holds the erasure, and
    whether it met a record past the replay's end (later parts then add nothing).

    `replay` is one part; `verify --jobs` replays a long session as parts read apart and folds
    them with `fold_parts`."""

    events: dict[int, LedgerRecord] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    shaping: list[tuple[int, Kind, Mapping[str, Any] | None]] = field(default_factory=list)
    version: int = 0
    deleted: bool = False
    ended: bool = False


def replay_part(
    records: Iterable[LedgerRecord], upto_version: int | None = None, at: datetime | None = None
) -> ReplayPart:
    """The part of a replay the records (consecutive, by position) make; see `replay`."""
    part = ReplayPart()
    state = part.state
    for record in records:
        if (upto_version is not None and record.version > upto_version) or (
            at is not None and (record.recorded_at or record.occurred_at) > at
        ):
            part.ended = True
            break
        part.version = record.version
        payload = record.payload
        if record.kind is Kind.CREATED:
            if payload is not None:
                state.update(split_state_delta(payload["state"]).session)
        elif record.kind is Kind.EVENT:
            part.events[record.position] = record
            if payload is not None:
                state.update(split_state_delta(payload["state_delta"]).session)
        elif record.kind in (Kind.COMPACTION, Kind.REWIND):
            part.shaping.append((record.position, record.kind, payload))
            if record.kind is Kind.REWIND and payload is not None:
                state.update(payload["state_delta"])
        elif record.kind is Kind.ERASURE:
            part.deleted = True
    return part


def fold_parts(parts: Iterable[ReplayPart]) -> ReplayPart:
    """The parts of consecutive runs of records, in order, as one part."""
    whole = ReplayPart()
    for part in parts:
        whole.events.update(part.events)
        whole.state.update(part.state)
        whole.shaping += part.shaping
        whole.version = part.version if part.version or part.events or part.shaping else whole.version
        whole.deleted |= part.deleted
        if part.ended:
            whole.ended = True
            break
    return whole


def window_shape(shaping: Iterable[tuple[int, Kind, Mapping[str, Any] | None]]) -> tuple[WindowShape, int]:
    """The window rule's state after the compactions and rewinds, and the window epoch."""
    shape = WindowShape()
    epoch = 0
    for position, kind, payload in shaping:
        epoch += 1
        if kind is Kind.COMPACTION:
            shape.compact(payload or {})
        elif payload is not None:  # a rewind erased with its session (the projection is empty then)
            shape.rewind(payload, position)
    return shape, epoch


def replay(
    records: Iterable[LedgerRecord], upto_version: int | None = None, at: datetime | None = None
) -> Projection:
    """Rebuild a session's projection from its records (by position) alone.

    `upto_version` keeps the records whose version is at most that; `at` those recorded (or,
    without a recording time, that occurred) at or before that moment.
    """
    part = replay_part(records, upto_version, at)
    shape, epoch = window_shape(part.shaping)
    version, events = part.version, part.events
    if part.deleted:
        hidden = tuple(sorted(shape.hidden))
        return Projection((), (), hidden, EMPTY, version, (), (), deleted=True, shape=shape, epoch=epoch)
    archived, window = shape.split(events)
    return Projection(
        window=_events(events, window, archived=False),
        archived=_events(events, archived, archived=True),
        hidden=tuple(sorted(shape.hidden)),
        session_state=FrozenDict(part.state),
        version=version,
        window_positions=tuple(window),
        archived_positions=tuple(archived),
        shape=shape,
        epoch=epoch,
    )


def _events(
    records: Mapping[int, LedgerRecord], positions: Iterable[int], archived: bool
) -> tuple[SessionEvent, ...]:
    return tuple(
        records[p].event(archived) for p in positions if p in records and records[p].payload is not None
    )


def chain_problems(records: Iterable[LedgerRecord]) -> list[str]:
    """What is wrong with a session's hash chain (empty when it verifies), naming each record."""
    problems: list[str] = []
    expected_prev = GENESIS_HASH
    expected_position = 1
    for record in records:
        where = f"{record.session_id} position {record.position}"
        if record.position != expected_position:
            problems.append(f"{where}: expected position {expected_position} (a record is missing)")
        if record.prev_hash != expected_prev:
            problems.append(f"{where}: prev_hash does not match the previous record's hash")
        if record.payload is not None and sha256_hex(canonical(record.payload)) != record.content_hash:
            problems.append(f"{where}: payload does not match its content hash (edited)")
        if covers_recorded_at(record) is None:
            problems.append(f"{where}: row hash does not match the record (edited)")
        expected_prev = record.row_hash
        expected_position = record.position + 1
    return problems
