"""The ledger's records: a session's ledger is a dense sequence of `LedgerRecord`s (positions
1..n), each placed on its session's hash chain from a `Draft`, its content built once (payload,
canonical text, content hash) before its place is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sessionledger.domain.codec import event_from_payload, event_to_payload, format_timestamp
from sessionledger.domain.entries import Entry, Forget, entry_payload
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.fast_constructor import fast_constructor
from sessionledger.domain.hashing import canonical, canonical_without_floats, row_hash, sha256_hex
from sessionledger.domain.sessions import Session, strip_temp
from sessionledger.domain.turns import utf8_length

if TYPE_CHECKING:
    from sessionledger.domain.window import Window


class Kind(StrEnum):
    """What a ledger record says happened."""

    CREATED = "created"
    EVENT = "event"
    COMPACTION = "compaction"
    REWIND = "rewind"
    ERASURE = "erasure"
    ENTRY = "entry"
    """An adapter's entry (`domain.entries`): on the chain, outside the message window."""
    FORGOTTEN = "forgotten"
    """A `domain.entries.Forget`: the adapter forgot entries; the ledger keeps them."""


ERASABLE = frozenset({Kind.CREATED, Kind.EVENT, Kind.REWIND, Kind.ENTRY, Kind.FORGOTTEN})
"""The kinds whose payload a session's deletion erases (messages, metadata, state, adapters'
entries and the keys they forgot); a compaction's payload (positions) and the erasure's own (a
reason) stay readable."""

ADAPTER_KINDS = frozenset({Kind.ENTRY, Kind.FORGOTTEN})
"""The kinds an adapter appends beside events (`entry_draft`, `forgotten_draft`): placed at the
session's head without moving its event version or touching its window."""


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
        """The record, built by `fast_constructor` as `SessionEvent._trusted` builds an event:
        one is built for every appended event and for every record read (a verify: millions)."""
        return _build_record(
            session_id,
            position,
            version,
            kind,
            event_id,
            occurred_at,
            payload,
            content_hash,
            prev_hash,
            row_hash,
            event_type,
            branch,
            synthetic,
            recorded_at,
            token_count,
            global_position,
        )

    def event(self, archived: bool = False) -> SessionEvent:
        """The session event an `event` record holds (`ValueError` when it was erased)."""
        if self.kind is not Kind.EVENT or self.payload is None:
            raise ValueError(f"record {self.position} of {self.session_id} holds no readable event")
        return event_from_payload(self.session_id, self.event_id or "", self.payload, archived)


_build_record = fast_constructor(LedgerRecord, LedgerRecord.__slots__)


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
    CONFLICT outcome: `write_plans.version_check`); `None` appends whatever the version."""
    session_id: str | None = None
    """The session of an adapter's draft (`ADAPTER_KINDS`), which holds no event to say it."""

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
        session_id: str | None = None,
    ) -> Draft:
        """The draft, built as `LedgerRecord._trusted` builds a record (one per appended event or
        adapter entry: `dataclasses.replace` of a built one cost as much as building it)."""
        return _build_draft(
            kind,
            occurred_at,
            payload,
            text,
            content_hash,
            event,
            event_id,
            event_type,
            branch,
            synthetic,
            None,
            session_id,
        )

    def expecting(self, version: int) -> Draft:
        """This draft as a conditional append at `version` (`expected_version`), built as `_trusted`
        builds one: an adapter's every append is conditional."""
        return _build_draft(
            self.kind,
            self.occurred_at,
            self.payload,
            self.text,
            self.content_hash,
            self.event,
            self.event_id,
            self.event_type,
            self.branch,
            self.synthetic,
            version,
            self.session_id,
        )

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


_build_draft = fast_constructor(Draft, Draft.__slots__)


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
    session_id: str | None = None,
) -> Draft:
    text = canonical(payload) if text is None else text
    return Draft._trusted(
        kind,
        occurred_at,
        payload,
        text,
        sha256_hex(text),
        event,
        event_id,
        event_type,
        branch,
        synthetic,
        session_id,
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
    return canonical_without_floats(payload)


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


def compaction_writes(record: LedgerRecord) -> set[int]:
    """The positions of the events a compaction record's own transaction wrote (its summaries):
    those of its window after its read head. Events another writer appended meanwhile also follow
    the read head, but after the window, not in it (`window.WindowShape.split`)."""
    payload = record.payload
    if record.kind is not Kind.COMPACTION or payload is None:
        return set()
    return {position for position in payload["window"] if position > payload["read_head"]}


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


def entry_draft(session_id: str, entry: Entry, at: datetime) -> Draft:
    """An adapter's entry: its type and key also go in the `event_type` and `branch` columns
    (which `verify` checks against the payload), so that a backend selects a session's entries
    by type and key prefix without reading their payloads."""
    payload = entry_payload(entry)
    text = canonical_without_floats(payload) if entry.plain else None
    return _draft(
        Kind.ENTRY, at, payload, text, event_type=entry.type, branch=entry.key, session_id=session_id
    )


def forgotten_draft(session_id: str, forget: Forget, at: datetime) -> Draft:
    """The record that an adapter forgot the entries `forget` matches among those before it."""
    return _draft(Kind.FORGOTTEN, at, forget.to_payload(), session_id=session_id)


def derived_columns(kind: Kind, payload: Mapping[str, Any]) -> tuple[str | None, str | None, bool]:
    """The `event_type`, `branch` and `synthetic` columns a record of `kind` derives from its
    payload (searched and filtered on, so `verify` checks them); `KeyError` and the like when the
    payload is malformed."""
    if kind is Kind.EVENT:
        return payload["message"]["type"], payload["branch"], payload["metadata"].get("synthetic") is True
    if kind is Kind.ENTRY:
        return payload["type"], payload["key"], False
    return None, None, False


def erasure_draft(*, at: datetime, reason: str) -> Draft:
    """The record that a session was deleted (its other payloads are erased with it)."""
    return _draft(Kind.ERASURE, at, {"reason": reason, "deleted_at": format_timestamp(at)})


@dataclass(frozen=True, slots=True)
class TailRow:
    """One ledger row as the relay sees it (global order across sessions)."""

    global_position: int
    session_id: str
    app_name: str
    kind: str
