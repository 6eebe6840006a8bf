"""LangGraph checkpoints and pending writes as ledger entries, and back.

A checkpoint is one `langgraph.checkpoint` entry keyed `<ns>\\x1f<checkpoint id>` whose value
holds the whole checkpoint (channel values included) and its metadata as the saver's `serde`
typed them (base64 in the JSON), its parent's id and its run id (plain, for `delete_for_runs`).
A pending write is one `langgraph.write` entry keyed `<ns>\\x1f<checkpoint id>\\x1f<task id>\\x1f<idx>`,
so a checkpoint's writes are the entries under its key and a separator (one prefix read), and
a namespace's entries are those under `<ns>\\x1f`. `\\x1f` (the unit separator) is in no namespace
LangGraph writes (node names and task ids, joined by `|` and `:`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

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
from sessionledger.domain.entries import Entry, StoredEntry

CHECKPOINT = "langgraph.checkpoint"
WRITE = "langgraph.write"
SEP = "\x1f"


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


def checkpoint_entry(
    serde: SerializerProtocol,
    ns: str,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    parent_id: str | None,
) -> Entry:
    """The entry of a checkpoint (`metadata` as `get_checkpoint_metadata` made it)."""
    run_id = metadata.get("run_id")
    value = {
        "ns": ns,
        "id": checkpoint["id"],
        "parent": parent_id,
        "run_id": None if run_id is None else str(run_id),
        "checkpoint": _typed(serde, checkpoint),
        "metadata": _typed(serde, metadata),
    }
    return Entry(CHECKPOINT, checkpoint_key(ns, checkpoint["id"]), value)


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
        entries.append(
            Entry(
                WRITE,
                f"{writes_prefix(ns, checkpoint_id)}{task_id}{SEP}{idx}",
                {
                    "task_id": task_id,
                    "task_path": task_path,
                    "idx": idx,
                    "channel": channel,
                    "value": _typed(serde, value),
                },
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
) -> CheckpointTuple:
    """The tuple of a stored checkpoint and its live writes (newest first, as read)."""
    value = stored.value
    ns, checkpoint_id, parent = value["ns"], value["id"], value["parent"]
    checkpoint: Checkpoint = _untyped(serde, value["checkpoint"])
    versions = checkpoint.get("channel_versions", {})
    values = checkpoint.get("channel_values", {})
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


def written_for(stored: StoredEntry) -> tuple[str, str]:
    """The `(ns, checkpoint id)` a write entry belongs to, from its key."""
    ns, checkpoint_id, _ = stored.key.split(SEP, 2)
    return ns, checkpoint_id
