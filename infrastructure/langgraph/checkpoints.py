"""LangGraph checkpoints and pending writes as ledger entries, and back.

A checkpoint is one `langgraph.checkpoint` entry keyed `<ns>\\x1f<checkpoint id>` whose value
holds the checkpoint and its metadata as the saver's `serde` typed them (base64 in the JSON), its
parent's id and its run id (plain, for `delete_for_runs`). With langgraph's own serializer, a
channel value that is a JSON scalar (a string, a 64-bit integer, a finite float, a bool, None: what
`PostgresSaver` keeps inline too) is held as JSON under `values` instead, not in the typed
checkpoint: the serializer's msgpack and base64 made a string a third longer, and a row over
PostgreSQL's compression threshold (about 2 KB) pays a compression on write and on read (of 1,000
puts of the LangGraph benchmark's texts, 373 rows were compressed, 324 with the texts as JSON).
A pending write is one `langgraph.write` entry keyed `<ns>\\x1f<checkpoint id>\\x1f<task id>\\x1f<idx>`,
so a checkpoint's writes are the entries under its key and a separator (one prefix read), and
a namespace's entries are those under `<ns>\\x1f`. `\\x1f` (the unit separator) is in no namespace
LangGraph writes (node names and task ids, joined by `|` and `:`).

The messages of a `messages` channel are not written again by every checkpoint that holds them
(a thread of n turns would write O(n²) bytes): each message is one `langgraph.message` entry,
written once, keyed `<message id>\x1f<digest of its serialized bytes>` (a message that add_messages
replaced under its id is another entry), and the checkpoint holds their keys in order.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from sessionledger.domain.codec import INT64
from sessionledger.domain.entries import MAX_KEY_LENGTH, Entry, StoredEntry

CHECKPOINT = "langgraph.checkpoint"
WRITE = "langgraph.write"
MESSAGE = "langgraph.message"
SEP = "\x1f"
MESSAGES = "messages"
"""The channel whose messages are written once each (the key of LangGraph's `MessagesState`)."""


def ns_prefix(ns: str) -> str:
    """The keys of one namespace's checkpoints and writes start with this."""
    return f"{ns}{SEP}"


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    return f"{ns}{SEP}{checkpoint_id}"


def writes_prefix(ns: str, checkpoint_id: str) -> str:
    """The keys of one checkpoint's pending writes start with this."""
    return f"{ns}{SEP}{checkpoint_id}{SEP}"


def _typed(serde: SerializerProtocol, value: Any) -> list[str]:
    kind, data = serde.dumps_typed(value)
    return [kind, base64.b64encode(data).decode("ascii")]


def _untyped(serde: SerializerProtocol, pair: Sequence[str]) -> Any:
    return serde.loads_typed((pair[0], base64.b64decode(pair[1])))


def _plain_texts(*values: Any) -> bool:
    """Whether each of the values a saver puts in an entry beside what it made itself (base64,
    integers, `_json_scalar`s) is `None` or a `str` without NUL: the entry's value is then plain
    JSON (`Entry.plain`), which its append does not check again."""
    return all(value is None or (type(value) is str and "\x00" not in value) for value in values)


@dataclass
class KnownMessages:
    """What a saver knows of one thread's messages: the message object it last keyed (or read)
    under each message id (that object, or one equal to it, is not serialized again: a serializer
    that encrypts gives other bytes, so another key, every time), the keys it stored as entries,
    and the ids it stored as events.

    The objects are held weakly: a graph's run holds them from its read to its last put, which is
    when they are needed, and a saver that kept them alive held every remembered thread's whole
    conversation (about 2.7 KB a message of a thousand characters)."""

    keyed: dict[str, tuple[weakref.ref[BaseMessage], str]] = field(default_factory=dict)
    stored: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)
    """The message ids stored as the session's events (`messages.new_message_events`)."""
    counted: int = 0
    """How many of `stored` the saver last counted into its total (`LedgerSaver._known_messages`)."""

    def key(self, message: BaseMessage, key: str) -> None:
        """Remember `message` as keyed `key` (under its id) while it lives: once it is collected,
        so is the entry, which keyed nothing any more (the next message under its id is
        serialized again), and which a long-lived thread kept for every message it ever held
        (2,400 messages: 575 bytes each, with the keys and ids it still holds). A callback that
        races a new entry under the same id can drop that one: its message is then serialized
        once more, and its key is found stored."""
        message_id = str(message.id)
        known = weakref.ref(self)

        def collected(ref: weakref.ref[BaseMessage]) -> None:
            holder = known()
            entry = None if holder is None else holder.keyed.get(message_id)
            if holder is not None and entry is not None and entry[0] is ref:
                holder.keyed.pop(message_id, None)

        self.keyed[message_id] = (weakref.ref(message, collected), key)


def _same(seen: BaseMessage | None, message: BaseMessage) -> bool:
    """Whether the object keyed before (if still alive) is the message, or equal to it."""
    return seen is not None and (seen is message or seen == message)


def message_entries(
    serde: SerializerProtocol, values: Any, known: KnownMessages
) -> tuple[list[str], list[Entry]] | None:
    """The keys of a `messages` channel's messages, and the entries of those not stored yet;
    `None` when the channel holds anything but messages with ids (it is then kept whole)."""
    if not isinstance(values, list):
        return None
    keys: list[str] = []
    entries: list[Entry] = []
    for message in values:
        if not isinstance(message, BaseMessage) or not isinstance(message.id, str) or not message.id:
            return None
        cached = known.keyed.get(message.id)
        key = cached[1] if cached is not None and _same(cached[0](), message) else None
        if key is None or key not in known.stored:
            kind, data = serde.dumps_typed(message)
            digest = hashlib.sha256(kind.encode() + b"\x00" + data).hexdigest()[:32]
            key = f"{message.id}{SEP}{digest}"
            if len(key) > MAX_KEY_LENGTH:
                return None
            known.key(message, key)
            if key not in known.stored and all(entry.key != key for entry in entries):
                value = {"value": [kind, base64.b64encode(data).decode("ascii")]}
                entries.append(Entry(MESSAGE, key, value, _plain_texts(kind)))
        keys.append(key)
    return keys, entries


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_scalar(value: Any) -> bool:
    """Whether a channel value comes back from the ledger's JSON exactly as it went in, type
    included: a `str` (no NUL, no lone surrogate), an `int` within 64 bits, a finite `float`, a
    `bool` or `None`; not their subclasses (an enum member), which only the serializer keeps."""
    kind = type(value)
    if kind is str:
        return "\x00" not in value and (value.isascii() or _SURROGATE.search(value) is None)
    if kind is int:
        return value in INT64
    if kind is float:
        return math.isfinite(value)
    return kind is bool or value is None


def _split_values(
    serde: SerializerProtocol, values: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The channel values held as JSON (`_json_scalar`, only under langgraph's own serializer, whose
    msgpack gives those back unchanged: any other serializer, an encrypting one, gets every value)
    and the rest, for the typed checkpoint."""
    if type(serde) is not JsonPlusSerializer:
        return {}, dict(values)
    scalars: dict[str, Any] = {}
    typed: dict[str, Any] = {}
    for name, value in values.items():
        (scalars if _json_scalar(value) else typed)[name] = value
    return scalars, typed


def checkpoint_entry(
    serde: SerializerProtocol,
    ns: str,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    parent_id: str | None,
    message_keys: list[str] | None = None,
) -> Entry:
    """The entry of a checkpoint (`metadata` as `get_checkpoint_metadata` made it); with
    `message_keys`, its `messages` channel is those message entries."""
    run_id = metadata.get("run_id")
    values = checkpoint["channel_values"]
    if message_keys is not None:
        values = {name: v for name, v in values.items() if name != MESSAGES}
    scalars, typed = _split_values(serde, values)
    value: dict[str, Any] = {
        "ns": ns,
        "id": checkpoint["id"],
        "parent": parent_id,
        "run_id": None if run_id is None else str(run_id),
        "checkpoint": _typed(serde, {**checkpoint, "channel_values": typed}),
        "metadata": _typed(serde, metadata),
        "messages": message_keys,
    }
    if scalars:
        value["values"] = scalars
    kinds = (value["checkpoint"][0], value["metadata"][0])
    plain = _plain_texts(ns, checkpoint["id"], parent_id, value["run_id"], *kinds, *scalars) and not any(
        type(scalar) is float for scalar in scalars.values()
    )
    return Entry(CHECKPOINT, checkpoint_key(ns, checkpoint["id"]), value, plain)


def refers_to_messages(stored: StoredEntry) -> bool:
    """Whether a stored checkpoint's `messages` channel is message entries."""
    return stored.value.get("messages") is not None


class MessageValues:
    """A thread's message entries, each deserialized once, on first use, and then known under its
    key (`KnownMessages.keyed`): a graph's next put holds the very objects read, and keys them
    without serializing them again."""

    def __init__(
        self, serde: SerializerProtocol, stored: Sequence[StoredEntry], known: KnownMessages
    ) -> None:
        self._serde = serde
        self._stored = {entry.key: entry.value["value"] for entry in stored}
        self._values: dict[str, Any] = {}
        self._known = known

    def __call__(self, keys: Sequence[str]) -> list[Any]:
        found = []
        for key in keys:
            value = self._values.get(key)
            if value is None:
                value = self._values[key] = _untyped(self._serde, self._stored[key])
                if isinstance(value, BaseMessage) and isinstance(value.id, str):
                    self._known.key(value, key)
            found.append(value)
        return found


def write_entries(
    serde: SerializerProtocol,
    ns: str,
    checkpoint_id: str,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> list[Entry]:
    """The entries of a task's writes; a special channel's index is langgraph's (`WRITES_IDX_MAP`)."""
    entries = []
    for position, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, position)
        typed = _typed(serde, value)
        entries.append(
            Entry(
                WRITE,
                f"{writes_prefix(ns, checkpoint_id)}{task_id}{SEP}{idx}",
                {"task_id": task_id, "task_path": task_path, "idx": idx, "channel": channel, "value": typed},
                _plain_texts(task_id, task_path, channel, typed[0]),
            )
        )
    return entries


def thread_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def checkpoint_metadata(serde: SerializerProtocol, stored: StoredEntry) -> CheckpointMetadata:
    metadata: CheckpointMetadata = _untyped(serde, stored.value["metadata"])
    return metadata


def checkpoint_tuple(
    serde: SerializerProtocol,
    thread_id: str,
    stored: StoredEntry,
    writes: Sequence[StoredEntry],
    metadata: CheckpointMetadata | None = None,
    messages: MessageValues | None = None,
) -> CheckpointTuple:
    """The tuple of a stored checkpoint and its live writes (newest first, as read); `messages`,
    the thread's message entries, when the checkpoint refers to them."""
    value = stored.value
    ns, checkpoint_id, parent = value["ns"], value["id"], value["parent"]
    checkpoint: Checkpoint = _untyped(serde, value["checkpoint"])
    versions = checkpoint.get("channel_versions", {})
    values = checkpoint.get("channel_values", {})
    values.update(value.get("values", ()))
    if value.get("messages") is not None and messages is not None:
        values[MESSAGES] = messages(value["messages"])
    checkpoint["channel_values"] = {name: v for name, v in values.items() if name in versions}
    return CheckpointTuple(
        config=thread_config(thread_id, ns, checkpoint_id),
        checkpoint=checkpoint,
        metadata=checkpoint_metadata(serde, stored) if metadata is None else metadata,
        parent_config=None if parent is None else thread_config(thread_id, ns, parent),
        pending_writes=pending_writes(serde, writes),
    )


def pending_writes(serde: SerializerProtocol, writes: Sequence[StoredEntry]) -> list[PendingWrite]:
    """A checkpoint's writes as langgraph keeps them: per `(task id, idx)` the first one written,
    but the last for a special channel (negative idx); in `writes_sort_key` order."""
    kept: dict[tuple[str, int], Mapping[str, Any]] = {}
    for stored in reversed(writes):  # oldest first
        value = stored.value
        key = (value["task_id"], value["idx"])
        if key in kept and value["idx"] >= 0:
            continue
        kept[key] = value
    ordered = sorted(kept.values(), key=lambda v: writes_sort_key(v["task_path"], v["task_id"], v["idx"]))
    return [(v["task_id"], v["channel"], _untyped(serde, v["value"])) for v in ordered]


def checkpoint_id_of(stored: StoredEntry) -> str:
    checkpoint_id: str = stored.value["id"]
    return checkpoint_id


def message_id_of(stored: StoredEntry) -> str:
    """The id of the message a message entry holds, from its key."""
    return stored.key.split(SEP, 1)[0]


def written_for(stored: StoredEntry) -> tuple[str, str]:
    """The `(ns, checkpoint id)` a write entry belongs to, from its key."""
    ns, checkpoint_id, _ = stored.key.split(SEP, 2)
    return ns, checkpoint_id
