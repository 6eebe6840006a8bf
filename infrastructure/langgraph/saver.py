"""`LedgerSaver`: LangGraph's checkpointer on the ledger (`checkpointer=LedgerSaver(url)`).

A thread is a session (`thread_id` is its id, app `langgraph`), created for its user by the
first `put`. Every checkpoint and pending write is a ledger entry (`checkpoints.py`), so verify,
replay, timelines, digests and proofs cover a graph's state; each message of its `messages`
channel is written once (an entry the checkpoints refer to) and is also one of the session's
message events, stored once by id (`messages.py`), in the same transaction as the checkpoint
(not under langgraph's `EncryptedSerializer`: events are readable, and its user asked for the
graph's state to be stored encrypted).
Deleting or pruning appends forget records: the saver forgets, the ledger keeps what it forgot
and that it did. A thread deleted this way takes new checkpoints again (its session stays);
`SessionService.delete_session` erases it for good.

The user of a call is `config["configurable"]["user_id"]`, else the saver's `user_id`, else
`"langgraph"` (for the calls without a config: the saver's, else `"langgraph"`). Another user's
thread reads as absent, and writing to it is a `ValueError`.

Both faces run one implementation over a `SessionService`: the synchronous methods call it on
the caller's thread, the coroutines hand the same call to the `AsyncSessionService`'s pool in
one hop, so no coroutine blocks the event loop. A put (and a task's writes) to a thread known to
be the user's is built on the loop, as langgraph's own async savers build theirs, and sent by the
async service's `append_entries`, from the loop itself where the ledger has loop connections
(PostgreSQL, MariaDB/MySQL): no thread hop.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from sessionledger.domain.entries import Entry, Forget, StoredEntry
from sessionledger.domain.errors import SessionExists, SessionNotFound
from sessionledger.domain.events import SessionEvent
from sessionledger.infrastructure.async_service import AsyncSessionService, open_async_service
from sessionledger.infrastructure.langgraph.checkpoints import (
    CHECKPOINT,
    MESSAGE,
    MESSAGES,
    WRITE,
    KnownMessages,
    MessageValues,
    checkpoint_entry,
    checkpoint_id_of,
    checkpoint_key,
    checkpoint_metadata,
    checkpoint_tuple,
    message_entries,
    message_id_of,
    ns_prefix,
    refers_to_messages,
    write_entries,
    writes_prefix,
    written_for,
)
from sessionledger.infrastructure.langgraph.messages import new_message_events
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settling import settled

APP_NAME = "langgraph"
"""The app the ledger files threads under (its compaction policy, its `app:` state)."""

DEFAULT_USER = "langgraph"
"""The owner of a thread when neither the config nor the saver names one."""

STRIPES = 64
"""Appends to one thread wait for each other in the saver (`LedgerSaver._append`, and
`_aappend` on an event loop), on one of this many locks (by the thread id's hash)."""

KEPT_THREADS = 4096
"""How many threads' owners and messages a saver remembers. Beyond, it forgets the owner it
remembered first (asked again when its thread is next used) and the messages of the thread it
used least recently (`KnownMessages`): a thread's messages are learnt again from its next read
(`get_tuple`, which langgraph makes before a run's puts), and a put that comes first writes its
messages again, which reads dedupe (the event id rule keeps each event once)."""

KEPT_MESSAGES = 100_000
"""How many stored message keys a saver remembers across the threads it keeps (with the thread's
event ids, about 440 bytes each): past it, the threads used least recently are forgotten as past
`KEPT_THREADS`, so a long-lived server of long threads stays bounded (4,096 threads of a thousand
messages held 1.8 GB). A thread's keys are counted each time it is used."""

FORGET_ALL = (Forget(CHECKPOINT), Forget(WRITE))
"""What deleting a thread forgets. Its message entries stay live: checkpoints written later may
refer to them (a saver remembers which it stored), and each is written once for all."""

LATEST_READ = 8
"""How many of a namespace's newest checkpoints and writes `get_tuple` reads at once for its
latest checkpoint: one read when that checkpoint has fewer writes since (a step's tasks' writes),
else two more, for the checkpoint and then exactly its writes."""

R = TypeVar("R")


class LedgerSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer whose threads are ledger sessions (`open_service`'s arguments, or
    an open `SessionService` or `AsyncSessionService` as `service`, which the saver leaves open).

    `serde` is langgraph's (`JsonPlusSerializer` by default). Close it with `close()` or
    `aclose()`, or use `with` / `async with`.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        service: SessionService | AsyncSessionService | None = None,
        user_id: str | None = None,
        serde: SerializerProtocol | None = None,
        **options: Any,
    ) -> None:
        super().__init__(serde=serde)
        self._message_events = not isinstance(self.serde, EncryptedSerializer)
        """Whether a `messages` channel's messages are also the session's events: not under
        langgraph's `EncryptedSerializer`, whose user asked that the graph's state be stored
        encrypted (events are readable JSON: what search, recall and the workers read)."""
        if service is not None and (database_url is not None or options):
            raise ValueError("give a database URL and options, or an open service, not both")
        if user_id is not None and (not isinstance(user_id, str) or not user_id):
            raise ValueError(f"user_id must be a non-empty string, not {user_id!r}")
        self.user_id = user_id
        self._own_pool = not isinstance(service, AsyncSessionService)
        """Whether closing the saver closes its async face: the one made here, over a given
        `SessionService` (which stays open) or over the ledger of `database_url` (closed with it)."""
        self._sync: SessionService | None = None
        if isinstance(service, AsyncSessionService):
            self._async = service
        elif isinstance(service, SessionService):
            self._sync = service
            self._async = AsyncSessionService.around(service)
        elif service is None:  # opened at the first call or `with`, never on an event loop
            self._async = open_async_service(database_url, **options)
        else:
            raise ValueError(f"service must be a SessionService or an AsyncSessionService, not {service!r}")
        self._owners: dict[str, str] = {}  # thread -> its user, for threads known to be theirs
        self._messages: OrderedDict[str, KnownMessages] = OrderedDict()  # least recently used first
        self._kept_messages = 0  # their `counted` summed
        self._lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(STRIPES)]
        self._loop_stripes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )

    # --- the two faces ----------------------------------------------------------------------

    @property
    def service(self) -> SessionService:
        """The ledger's service: `replay`, `records`, `get_events` of a thread for audit and recall."""
        if self._sync is None:
            self._sync = self._async.synchronous()
        return self._sync

    async def _run(self, call: Callable[[SessionService], R]) -> R:
        return await self._async.run(call)

    def close(self) -> None:
        """Close the ledger the saver opened (a given service stays open); closing twice is fine."""
        if self._own_pool:
            self._async.close()

    async def aclose(self) -> None:
        """`close()` off the event loop (it waits for the calls in flight)."""
        if self._own_pool:
            await self._async.aclose()

    def __enter__(self) -> LedgerSaver:
        """Opens the ledger now, so one that cannot be used fails here, not at the first call."""
        self.service  # noqa: B018  # the property opens it
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> LedgerSaver:
        """Opens the ledger now, on the async face's pool: connecting (and migrating a new
        database) never blocks the event loop, as a saver opened per request in an async handler
        did, 12 ms each time on PostgreSQL."""
        await self._run(lambda service: None)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- users and threads ------------------------------------------------------------------

    def _user(self, config: RunnableConfig | None = None) -> str:
        user = None if config is None else config.get("configurable", {}).get("user_id")
        user = user or self.user_id or DEFAULT_USER
        if not isinstance(user, str):
            raise ValueError(f"user_id must be a string, not {user!r}")
        return user

    def _readable(self, service: SessionService, thread_id: str, user: str) -> bool:
        """Whether the thread exists and is `user`'s (a thread known to be theirs is not asked again)."""
        if self._owners.get(thread_id) == user:
            return True
        session = service.get_session(thread_id, user_id=user)
        if session is None:
            return False
        self._own(thread_id, user)
        return True

    def _writable(self, service: SessionService, thread_id: str, user: str) -> None:
        """Make sure the thread is `user`'s, creating its session for them if it has none;
        `ValueError` for another user's thread, or a thread whose session was deleted."""
        if self._owners.get(thread_id) == user:
            return
        session = service.get_session(thread_id)
        if session is None:
            try:
                service.create_session(user, session_id=thread_id, app_name=APP_NAME)
            except SessionExists:  # created meanwhile (then checked below), or deleted for good
                session = service.get_session(thread_id)
                if session is None:
                    raise ValueError(
                        f"thread {thread_id!r} was deleted from the ledger: its id cannot be used again"
                    ) from None
        if session is not None and session.user_id != user:
            raise ValueError(f"thread {thread_id!r} does not belong to user {user!r}")
        self._own(thread_id, user)

    def _own(self, thread_id: str, user: str) -> None:
        """Remember that the thread is `user`'s: at most `KEPT_THREADS` owners, the one remembered
        first forgotten to make room, so that a saver past the limit asks again about one thread
        at a time, not about every busy thread at once."""
        with self._lock:
            if thread_id not in self._owners and len(self._owners) >= KEPT_THREADS:
                del self._owners[next(iter(self._owners))]
            self._owners[thread_id] = user

    def _append(
        self,
        service: SessionService,
        thread_id: str,
        user: str,
        entries: Sequence[Entry | Forget],
        events: Any = (),
    ) -> None:
        """Append to a writable thread, once more if the session went away since it was known.

        LangGraph writes a step's checkpoint and its tasks' writes from several threads at once;
        a thread's ledger records form one chain, so its appends are made one at a time here:
        each then finds the chain's head where the last one left it (the ledger's one-statement
        append), where racing each other in the database they took the slower, locking path."""
        self._writable(service, thread_id, user)
        with self._stripes[hash(thread_id) % STRIPES]:
            try:
                service.append_entries(thread_id, entries, events=events)
            except SessionNotFound:
                self._owners.pop(thread_id, None)
                self._writable(service, thread_id, user)
                service.append_entries(thread_id, entries, events=events)

    async def _aappend(
        self,
        thread_id: str,
        user: str,
        entries: Sequence[Entry | Forget],
        events: Sequence[SessionEvent] = (),
    ) -> None:
        """`_append` for the coroutines: to a thread known to be the user's, the async service's
        `append_entries`, sent from the event loop when it can be (the hop to a thread cost a put
        a fifth of its time or more); else `_append` on its pool, which checks the owner (and
        creates the thread's session), as it does for any thread not known to be the user's."""
        async with self._loop_stripe(thread_id):
            if self._owners.get(thread_id) == user:
                try:
                    await self._async.append_entries(thread_id, entries, events=events)
                    return
                except SessionNotFound:  # gone since it was known: `_append` finds out why
                    self._owners.pop(thread_id, None)
            await self._run(lambda service: self._append(service, thread_id, user, entries, events))

    def _loop_stripe(self, thread_id: str) -> asyncio.Lock:
        """The thread's stripe among the running loop's (`_stripes` for the coroutines: langgraph
        writes a step's checkpoint and its tasks' writes from several tasks at once, which, each
        planned from the same cached head, found it moved and took the synchronous path). One set
        per loop, as an asyncio lock serves one loop."""
        loop = asyncio.get_running_loop()
        stripes = self._loop_stripes.get(loop)
        if stripes is None:
            with self._lock:
                stripes = self._loop_stripes.setdefault(loop, [asyncio.Lock() for _ in range(STRIPES)])
        return stripes[hash(thread_id) % STRIPES]

    def _threads(self, service: SessionService, config: RunnableConfig | None, user: str) -> list[str]:
        """The threads a listing or a deletion by run covers: the config's, or all the user's."""
        if config is not None:
            thread_id = str(config["configurable"]["thread_id"])
            return [thread_id] if self._readable(service, thread_id, user) else []
        threads = [s.id for s in service.list_sessions(user, app_name=APP_NAME)]
        for thread_id in threads:
            self._own(thread_id, user)
        return threads

    # --- put, put_writes --------------------------------------------------------------------

    def _checkpoint_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> _CheckpointPut:
        """What a put appends: the checkpoint's entry after its new message entries, and its new
        message events (no I/O)."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        known = self._known_messages(thread_id)
        values = checkpoint["channel_values"]
        split = None
        if MESSAGES in values and MESSAGES in checkpoint["channel_versions"]:
            split = message_entries(self.serde, values[MESSAGES], known)
        keys, messages = (None, []) if split is None else split
        entry = checkpoint_entry(
            self.serde,
            ns,
            checkpoint,
            get_checkpoint_metadata(config, metadata),
            configurable.get("checkpoint_id"),
            keys,
        )
        events = (
            list(new_message_events(thread_id, values[MESSAGES], known.events))
            if self._message_events and MESSAGES in new_versions and MESSAGES in values
            else []
        )
        return _CheckpointPut(
            thread_id, ns, checkpoint["id"], self._user(config), known, messages, entry, events
        )

    def _known_messages(self, thread_id: str) -> KnownMessages:
        """What the saver knows of the thread's messages (`KEPT_THREADS` threads and about
        `KEPT_MESSAGES` messages, the threads used least recently forgotten first)."""
        with self._lock:
            known = self._messages.get(thread_id)
            if known is None:
                known = self._messages[thread_id] = KnownMessages()
            else:
                self._messages.move_to_end(thread_id)
                grown = len(known.stored) - known.counted
                known.counted += grown
                self._kept_messages += grown
            while len(self._messages) > 1 and (
                len(self._messages) > KEPT_THREADS or self._kept_messages > KEPT_MESSAGES
            ):
                _, forgotten = self._messages.popitem(last=False)
                self._kept_messages -= forgotten.counted
            return known

    def _message_values(
        self, service: SessionService, thread_id: str, checkpoints: Sequence[StoredEntry]
    ) -> MessageValues | None:
        """The thread's message entries, when one of `checkpoints` refers to them; they are then
        known stored, and their messages' events too (a put writes a message's first entry and its
        event in one transaction), so a saver that did not write them (another process, this one
        before a restart, or after forgetting the thread) writes neither again: it sent a long
        thread's every event again, for the ledger to find each a duplicate."""
        if not any(map(refers_to_messages, checkpoints)):
            return None
        stored = service.entries(thread_id, MESSAGE)
        known = self._known_messages(thread_id)
        known.stored.update(entry.key for entry in stored)
        known.events.update(message_id_of(entry) for entry in stored)
        return MessageValues(self.serde, stored, known)

    def _write_entries(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> tuple[str, list[Entry]]:
        """The config's thread, and the entries of a task's writes to its checkpoint (no I/O)."""
        configurable = config["configurable"]
        ns = configurable.get("checkpoint_ns", "")
        entries = write_entries(self.serde, ns, configurable["checkpoint_id"], writes, task_id, task_path)
        return str(configurable["thread_id"]), entries

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store the checkpoint (and its new messages as events) in one ledger transaction."""
        put = self._checkpoint_put(config, checkpoint, metadata, new_versions)
        self._append(self.service, put.thread_id, put.user, put.entries, put.events)
        return put.stored()

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        put = self._checkpoint_put(config, checkpoint, metadata, new_versions)
        return await settled(self._astored(put))

    async def _astored(self, put: _CheckpointPut) -> RunnableConfig:
        """`aput`'s append and then its bookkeeping, settled as one (`settling.py`): a cancel that
        lands once the append is under way waits for both, so the messages it stored are known
        stored and the next put does not write them again."""
        await self._aappend(put.thread_id, put.user, put.entries, put.events)
        return put.stored()

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes for the config's checkpoint (one transaction)."""
        thread_id, entries = self._write_entries(config, writes, task_id, task_path)
        if entries:
            self._append(self.service, thread_id, self._user(config), entries)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        thread_id, entries = self._write_entries(config, writes, task_id, task_path)
        if entries:
            await self._aappend(thread_id, self._user(config), entries)

    # --- get_tuple, list --------------------------------------------------------------------

    def _get_tuple(self, service: SessionService, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        if not self._readable(service, thread_id, self._user(config)):
            return None
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            return self._latest_tuple(service, thread_id, ns)
        key = checkpoint_key(ns, checkpoint_id)
        found = service.entries(thread_id, [CHECKPOINT, WRITE], prefix=key)
        stored = next((e for e in found if e.type == CHECKPOINT and e.key == key), None)
        if stored is None:
            return None
        writes = [e for e in found if e.type == WRITE and e.key.startswith(writes_prefix(ns, checkpoint_id))]
        messages = self._message_values(service, thread_id, [stored])
        return checkpoint_tuple(self.serde, thread_id, stored, writes, messages=messages)

    def _latest_tuple(self, service: SessionService, thread_id: str, ns: str) -> CheckpointTuple | None:
        """The namespace's latest checkpoint and its writes, in one read of the newest
        `LATEST_READ` entries under the namespace when the checkpoint is among them (the writes
        written since come before it, newest first), else in two more: the checkpoint, then its writes."""
        newest = service.entries(thread_id, [CHECKPOINT, WRITE], prefix=ns_prefix(ns), limit=LATEST_READ)
        found = next((entry for entry in newest if entry.type == CHECKPOINT), None)
        if found is not None:
            own = writes_prefix(ns, checkpoint_id_of(found))
            writes = [e for e in newest if e.position > found.position and e.key.startswith(own)]
        elif len(newest) < LATEST_READ:
            return None  # no checkpoint under the namespace
        else:
            latest = service.entries(thread_id, CHECKPOINT, prefix=ns_prefix(ns), limit=1)
            if not latest:
                return None
            found = latest[0]
            own = writes_prefix(ns, checkpoint_id_of(found))
            writes = service.entries(thread_id, WRITE, prefix=own, after=found.position)
        messages = self._message_values(service, thread_id, [found])
        return checkpoint_tuple(self.serde, thread_id, found, writes, messages=messages)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The config's checkpoint (its `checkpoint_id`, else the thread's latest in its namespace)."""
        return self._get_tuple(self.service, config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._run(lambda service: self._get_tuple(service, config))

    def _list(
        self,
        service: SessionService,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        user = self._user(config)
        configurable = {} if config is None else config["configurable"]
        ns = configurable.get("checkpoint_ns")
        only = get_checkpoint_id(config) if config is not None else None
        below = get_checkpoint_id(before) if before is not None else None
        prefix = "" if ns is None else ns_prefix(ns)
        found: list[CheckpointTuple] = []
        for thread_id in self._threads(service, config, user):
            if limit is not None and len(found) >= limit:
                break
            stored = service.entries(thread_id, [CHECKPOINT, WRITE], prefix=prefix)
            writes: dict[tuple[str, str], list[StoredEntry]] = {}
            for entry in stored:
                if entry.type == WRITE:
                    writes.setdefault(written_for(entry), []).append(entry)
            checkpoints = sorted(
                (e for e in stored if e.type == CHECKPOINT), key=checkpoint_id_of, reverse=True
            )
            messages = self._message_values(service, thread_id, checkpoints)
            for entry in checkpoints:
                checkpoint_id = checkpoint_id_of(entry)
                if (only and checkpoint_id != only) or (below and checkpoint_id >= below):
                    continue
                metadata = checkpoint_metadata(self.serde, entry)
                if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
                if limit is not None and len(found) >= limit:
                    break
                own = writes.get((entry.value["ns"], checkpoint_id), [])
                found.append(checkpoint_tuple(self.serde, thread_id, entry, own, metadata, messages))
        return found

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints of the config's thread (and namespace, when it names one), else of every
        thread of the saver's user, newest first; `filter` matches metadata values, `before` keeps
        checkpoints older than its checkpoint id, `limit` the first ones."""
        return iter(self._list(self.service, config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in await self._run(lambda service: self._list(service, config, filter, before, limit)):
            yield found

    # --- forgetting: delete_thread, delete_for_runs, prune ------------------------------------

    def _forget(self, service: SessionService, thread_id: str, user: str, forgets: Sequence[Forget]) -> None:
        """Append the forget records to the user's thread; an unknown thread is a no-op, another
        user's a `ValueError`."""
        session = service.get_session(thread_id)
        if session is None:
            return
        if session.user_id != user:
            raise ValueError(f"thread {thread_id!r} does not belong to user {user!r}")
        self._append(service, thread_id, user, forgets)

    def _delete_thread(self, service: SessionService, thread_id: str) -> None:
        self._forget(service, str(thread_id), self._user(), FORGET_ALL)

    def delete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint and write of the thread (the ledger keeps them and the record
        that they were forgotten; the thread's messages stay in its session)."""
        self._delete_thread(self.service, thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run(lambda service: self._delete_thread(service, thread_id))

    def _forget_checkpoints(
        self,
        service: SessionService,
        thread_id: str,
        user: str,
        keep: Callable[[Sequence[StoredEntry]], set[str]],
    ) -> None:
        """Forget the thread's checkpoints whose keys `keep(checkpoints)` leaves out, and their writes."""
        stored = service.entries(thread_id, [CHECKPOINT, WRITE])
        checkpoints = [e for e in stored if e.type == CHECKPOINT]
        kept = keep(checkpoints)
        gone = {e.key for e in checkpoints if e.key not in kept}
        if not gone:
            return
        writes = {e.key for e in stored if e.type == WRITE and checkpoint_key(*written_for(e)) in gone}
        forgets = [Forget(CHECKPOINT, keys=tuple(sorted(gone)))]
        if writes:
            forgets.append(Forget(WRITE, keys=tuple(sorted(writes))))
        self._forget(service, thread_id, user, forgets)

    def _delete_for_runs(self, service: SessionService, run_ids: Sequence[str]) -> None:
        runs = {str(run_id) for run_id in run_ids}
        if not runs:
            return
        user = self._user()
        for thread_id in self._threads(service, None, user):
            self._forget_checkpoints(
                service,
                thread_id,
                user,
                lambda checkpoints: {e.key for e in checkpoints if e.value["run_id"] not in runs},
            )

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Forget the checkpoints (and their writes) of the runs, in every thread of the saver's user."""
        self._delete_for_runs(self.service, run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._run(lambda service: self._delete_for_runs(service, run_ids))

    def _prune(self, service: SessionService, thread_ids: Sequence[str], strategy: str) -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        user = self._user()
        for thread_id in map(str, thread_ids):
            if strategy == "delete":
                self._forget(service, thread_id, user, FORGET_ALL)
                continue
            if self._readable(service, thread_id, user):
                self._forget_checkpoints(service, thread_id, user, _latest_per_namespace)
            elif service.get_session(thread_id) is not None:
                raise ValueError(f"thread {thread_id!r} does not belong to user {user!r}")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: forget all but each namespace's latest checkpoint (and their writes);
        `delete`: forget every checkpoint. The ledger keeps what was forgotten."""
        self._prune(self.service, thread_ids, strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._run(lambda service: self._prune(service, thread_ids, strategy))

    # --- copy_thread --------------------------------------------------------------------------

    def _copy_thread(self, service: SessionService, source: str, target: str) -> None:
        user = self._user()
        if not self._readable(service, source, user):
            return
        stored = service.entries(source, [CHECKPOINT, WRITE, MESSAGE])
        if not stored:
            return
        events = [replace(event, session_id=target) for event in service.get_events(source)]
        entries = [Entry(e.type, e.key, e.value) for e in reversed(stored)]  # oldest first
        self._append(service, target, user, entries, events)
        known = self._known_messages(target)
        known.stored.update(e.key for e in stored if e.type == MESSAGE)
        known.events.update(event.id for event in events)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy the thread's live checkpoints, writes and messages into another thread of the
        same user (created if it has no session)."""
        self._copy_thread(self.service, str(source_thread_id), str(target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run(
            lambda service: self._copy_thread(service, str(source_thread_id), str(target_thread_id))
        )


@dataclass(slots=True)
class _CheckpointPut:
    """A put's thread, namespace, checkpoint id and user, what it appends, and the thread's
    remembered messages, which `stored()` updates once it is appended (not frozen: a frozen
    dataclass cost five times as much to make, on every put)."""

    thread_id: str
    ns: str
    checkpoint_id: str
    user: str
    known: KnownMessages
    messages: list[Entry]
    entry: Entry
    events: list[SessionEvent]

    @property
    def entries(self) -> list[Entry]:
        return [*self.messages, self.entry]

    def stored(self) -> RunnableConfig:
        """Remember the messages and events stored; the config of the checkpoint."""
        self.known.stored.update(message.key for message in self.messages)
        self.known.events.update(event.id for event in self.events)
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": self.ns,
                "checkpoint_id": self.checkpoint_id,
            }
        }


def _latest_per_namespace(checkpoints: Sequence[StoredEntry]) -> set[str]:
    """The keys of each namespace's latest checkpoint (the greatest id, as langgraph orders them)."""
    latest: dict[str, StoredEntry] = {}
    for entry in checkpoints:
        ns = entry.value["ns"]
        if ns not in latest or checkpoint_id_of(entry) > checkpoint_id_of(latest[ns]):
            latest[ns] = entry
    return {entry.key for entry in latest.values()}
