"""`LedgerStore`: LangGraph's long-term memory store (`BaseStore`) on the ledger (extra `langgraph`).

Where items live: each namespace a user writes to is a ledger session of that user (app
`langgraph-store`, never expiring, its id a digest of user and namespace), made by the first put;
each item is an adapter entry of it keyed by the item's key. A put records a new entry (the
newest entry of a key is its value), a delete a `Forget` of the key; a read's TTL refresh and a
sweep's expiry record entries that apply only to the entry they were read from
(`store_items.APPLIES_TO`), so neither undoes a put or a delete recorded in between. A
session's records are thus the audit trail of what was remembered and forgotten in that
namespace, on the hash chain that `verify` checks. A directory session per user holds one entry
per namespace it wrote to, keyed by `namespace_prefix`, so a search under a prefix or
`list_namespaces` finds the namespaces to read.

Why a session per namespace rather than one per user: a get or a search of one namespace reads
that namespace's records only, however many other namespaces (other end users' memories, in
langgraph's `("memories", user_id)` convention) the store holds; and the session's owner is the
rule of isolation the service already enforces (another user's session reads as absent, refuses
writes). The price: a search under a prefix, and `list_namespaces`, read each namespace below
the prefix (one query each), where `PostgresStore` reads one table.

Every read asks the ledger what was recorded since this process last read the namespace (by any
process), so stores on one database, in one process or several, see each other's writes at once;
the items of the namespaces read most recently are kept parsed (`MIRRORED_SESSIONS`), and which
sessions are the user's is remembered for the `OWNED_SESSIONS` used most recently.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from sessionledger.domain.entries import Entry, Forget
from sessionledger.domain.errors import SessionExists
from sessionledger.domain.records import Draft
from sessionledger.infrastructure.async_service import AsyncSessionService, open_async_service
from sessionledger.infrastructure.langgraph.store_items import (
    ITEM_TYPE,
    NAMESPACE_TYPE,
    Mirror,
    Stored,
    answered,
    check_put,
    expiry,
    listed,
    namespace_prefix,
    now,
    page,
    ranked,
    stored,
)
from sessionledger.infrastructure.langgraph.store_vectors import ItemVectors
from sessionledger.infrastructure.recently_used import RecentlyUsed
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settling import settled
from sessionledger.infrastructure.vectors.keyed import KeyedVectors, beside_ledger, keyed_vectors
from sessionledger.infrastructure.vectors.schema import ExtensionMissing

APP_NAME = "langgraph-store"
"""The app the ledger files the store's sessions under."""

DEFAULT_USER = "langgraph"
"""The user of a store opened without `user_id` (the saver's default user too)."""

logger = logging.getLogger(__name__)

T = TypeVar("T")

MIRRORED_SESSIONS = 1024
"""How many namespaces' items (and directories) a store keeps parsed, the most recently read: a
namespace read again after it was dropped is read whole once more. A process serving many end users
holds their most active memories, not all of them."""

OWNED_SESSIONS = 100_000
"""How many sessions a store remembers to exist and to be its user's (about 170 bytes each), the
most recently used: a store serving many end users' namespaces remembered every one it ever
touched. One forgotten is asked about again (a read) when it is next used."""


def _session_id(*parts: str) -> str:
    """A session id from the user (and namespace) it holds: a digest, so any label length fits."""
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:40]
    return f"{APP_NAME}:{digest}"


def _embeddings(index: IndexConfig) -> Embeddings:
    embed = index.get("embed")
    if isinstance(embed, str):
        raise ValueError(
            f"LedgerStore's index 'embed' must be a langchain Embeddings or a function, not the string "
            f"{embed!r}: pass langchain's init_embeddings({embed!r}) instead"
        )
    return ensure_embeddings(embed)


class _Plan:
    """A batch's puts, deduplicated (the last put of a key wins, as in langgraph's stores), and the
    texts each asks to embed."""

    def __init__(self, ops: Sequence[Op], fields: Sequence[tuple[str, Any]] | None) -> None:
        self.puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                self.puts[(op.namespace, op.key)] = op
        self.texts: list[tuple[tuple[tuple[str, ...], str], str, str]] = []
        if fields is None:
            return
        for where, op in self.puts.items():
            if op.value is None or op.index is False:
                continue
            paths = fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
            for path, tokens in paths:
                texts = get_text_at_path(op.value, tokens)
                for i, text in enumerate(texts):
                    self.texts.append((where, f"{path}.{i}" if len(texts) > 1 else path, text))


class LedgerStore(BaseStore):
    """A langgraph `BaseStore` whose items are ledger records: `LedgerStore(url)` where langgraph's
    examples write `PostgresStore.from_conn_string(url)` or `InMemoryStore()`.

    `database_url` is `open_async_service`'s (connected at `with`, `async with` or the first call,
    never on an event loop; its threads run `abatch`), or pass an open `service`, a `SessionService`
    or an `AsyncSessionService` (whose threads then run `abatch`), which the store leaves open.
    Semantics are langgraph's stores': `put`, `get`, `search` (namespace prefix, `filter`, `query`,
    `limit`, `offset`; newest update first, or by similarity with a `query`), `delete`,
    `list_namespaces` (prefix, suffix, `max_depth`, `limit`, `offset`), each with its `a…` twin,
    and `batch` / `abatch`, where a batch's reads see the store as it was before the batch's puts.
    A put sets both `created_at` and `updated_at` (as `InMemoryStore`; the ledger keeps each put).

    `index` (`{"dims": N, "embed": ..., "fields": [...]}`) turns on semantic search: `embed` is a
    langchain `Embeddings` or a function of a list of texts (sync or async); the vectors of each
    item are recorded with it, and a search ranks the items under the prefix by their best cosine
    similarity to the query (the `score`), as `InMemoryStore` does. The candidates come from a
    vector store's keyed vectors (`vectors`: a database URL, `memory://` for this process, or a
    `KeyedVectors`; by default beside the ledger: pgvector in its PostgreSQL database, sqlite-vec in
    a SQLite file next to its file, opened with the ledger), derived from the ledger's records and
    caught up with them before each search; the filter, the scores (from the recorded vectors),
    `offset` and `limit` then apply as without an index.

    `ttl` is langgraph's `TTLConfig`: `default_ttl` minutes for puts that give none,
    `refresh_on_read` (default `True`: a get or search moves the item's expiry, recorded in the
    ledger), `omit_expired` (expired items read as absent before a sweep), `sweep_interval_minutes`
    for `start_ttl_sweeper()`. `sweep_ttl()` records the expiry of the expired items now. Neither a
    refresh nor a sweep undoes a put or a delete that another writer recorded after its read.

    Isolation: a store acts for one user, `user_id` (default `"langgraph"`); its namespaces are that
    user's. Another user's namespaces are neither readable nor writable through it: a store for
    `"bob"` never sees what `"alice"`'s store put, even under the same namespace (say
    `("memories", "alice")`), and its puts and deletes there change only bob's items. Give each end
    user a store of their own (they share one service), and keep langgraph's `("memories", user_id)`
    convention for the names.
    """

    supports_ttl = True

    def __init__(
        self,
        database_url: str | None = None,
        *,
        service: SessionService | AsyncSessionService | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        user_id: str | None = None,
        vectors: str | KeyedVectors | None = None,
    ) -> None:
        if service is not None and database_url is not None:
            raise ValueError("give LedgerStore a database_url or a service, not both")
        self._owns_service = service is None
        # a URL's ledger is opened at the first call or `with`, never on an event loop
        ledger = open_async_service(database_url) if service is None else service
        if not isinstance(ledger, SessionService | AsyncSessionService):
            raise ValueError(f"service must be a SessionService or an AsyncSessionService, not {service!r}")
        self._async = ledger if isinstance(ledger, AsyncSessionService) else None
        self._sync = ledger if isinstance(ledger, SessionService) else None
        self._user_id = DEFAULT_USER if user_id is None else user_id
        if not isinstance(self._user_id, str) or not self._user_id.strip():
            raise ValueError("user_id must be a non-empty string")
        self._directory = _session_id(self._user_id)
        self._owned: RecentlyUsed[str, bool] = RecentlyUsed(OWNED_SESSIONS)
        """Sessions known to exist and to be this user's (so reads and writes skip asking)."""
        self._mirrors: OrderedDict[str, Mirror[Any]] = OrderedDict()
        """The mirrors of the sessions read most recently, at most `MIRRORED_SESSIONS`."""
        self._mirrors_lock = threading.Lock()
        self.ttl_config = ttl
        self.index_config: IndexConfig | None = None
        self.embeddings: Embeddings | None = None
        self._fields: list[tuple[str, Any]] | None = None
        if index is not None:
            if "dims" not in index:
                raise ValueError("LedgerStore's index needs 'dims', the size of the embedding vectors")
            self.index_config = index
            self.embeddings = _embeddings(index)
            self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in index.get("fields") or ["$"]]
        self._vectors_at: str | KeyedVectors | None = None
        """Where the index's vectors are, opened at their first use, as the ledger is."""
        if index is not None:
            self._vectors_at = beside_ledger(ledger.settings.database_url) if vectors is None else vectors
        elif vectors is not None:
            raise ValueError("LedgerStore's vectors serve an index: give index= too")
        self._owns_vectors = not isinstance(vectors, KeyedVectors)
        self._item_vectors: ItemVectors | None = None
        self._vectors_lock = threading.Lock()
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()

    # --- the abstract pair ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = _checked(ops)
        plan = _Plan(ops, self._fields)
        queries = self._queries(ops)
        vectors: list[list[float]] = []
        found: dict[str, list[float]] = {}
        if self.embeddings is not None:
            texts = [text for _, _, text in plan.texts]
            vectors = (
                self._checked_vectors(self.embeddings.embed_documents(texts), len(texts)) if texts else []
            )
            found = {q: self._checked_vectors([self.embeddings.embed_query(q)], 1)[0] for q in queries}
        return self._run(ops, plan, vectors, found)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = _checked(ops)
        plan = _Plan(ops, self._fields)
        queries = self._queries(ops)
        vectors: list[list[float]] = []
        found: dict[str, list[float]] = {}
        if self.embeddings is not None:
            texts = [text for _, _, text in plan.texts]
            if texts:
                vectors = self._checked_vectors(await self.embeddings.aembed_documents(texts), len(texts))
            answers = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries))
            found = {q: self._checked_vectors([a], 1)[0] for q, a in zip(queries, answers, strict=True)}
        if self._async is not None:  # on the async service's own threads (it opens on one of them)
            return await self._async.run(lambda _: self._run(ops, plan, vectors, found))
        # settled: a cancel waits for the thread's call, so the write lands before the caller hears
        return await settled(asyncio.to_thread(self._run, ops, plan, vectors, found))

    # --- embedding ----------------------------------------------------------------------------------

    def _queries(self, ops: Sequence[Op]) -> list[str]:
        """The distinct query texts of the batch's searches (each embedded once)."""
        return sorted({op.query for op in ops if isinstance(op, SearchOp) and op.query})

    def _checked_vectors(self, vectors: Sequence[Sequence[float]], count: int) -> list[list[float]]:
        """The embedder's vectors as floats; `ValueError` unless there is one per text, of `dims`."""
        dims = self.index_config["dims"] if self.index_config else None
        if len(vectors) != count:
            raise ValueError(f"the embedder gave {len(vectors)} vectors for {count} texts")
        for vector in vectors:
            if len(vector) != dims:
                raise ValueError(
                    f"the embedder gave a vector of {len(vector)} dimensions; index dims is {dims}"
                )
        return [[float(x) for x in vector] for vector in vectors]

    # --- one batch against the ledger ---------------------------------------------------------------

    def _run(
        self,
        ops: Sequence[Op],
        plan: _Plan,
        vectors: list[list[float]],
        query_vectors: Mapping[str, list[float]],
    ) -> list[Result]:
        at = now()
        refresh: dict[tuple[str, ...], dict[str, Stored]] = {}
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = [s for s in self._items(op.namespace, op.key) if self._alive(s, at)]
                if found and op.refresh_ttl:
                    self._refresh(found, at, refresh)
                results.append(answered(found[0]) if found else None)
            elif isinstance(op, SearchOp):
                live = {
                    namespace: {key: s for key, s in self._live(namespace).items() if self._alive(s, at)}
                    for namespace in self._namespaces(op.namespace_prefix)
                }
                query = query_vectors.get(op.query) if op.query else None
                answer = self._search(op, live, query)
                if op.refresh_ttl:
                    self._refresh([live[r.namespace][r.key] for r in answer], at, refresh)
                results.append(answer)
            elif isinstance(op, ListNamespacesOp):
                held = [ns for ns in self._namespaces(()) if any(self._alive(s, at) for s in self._items(ns))]
                results.append(listed(held, op.match_conditions or (), op.max_depth, op.limit, op.offset))
            else:
                results.append(None)
        self._write(plan, vectors, refresh, at)
        return results

    def _search(
        self,
        op: SearchOp,
        live: Mapping[tuple[str, ...], Mapping[str, Stored]],
        query: list[float] | None,
    ) -> list[SearchItem]:
        """A search's page: newest first without a query; with one, ranked among the candidates
        the vector store gives once each namespace's vectors are caught up with the ledger."""
        if query is None or self._vectors_at is None:
            items = [s for found in live.values() for s in found.values()]
            return page(op, items) if query is None else ranked(op, items, query)
        vectors = self._vectors()
        for namespace in live:
            session_id = self.session_id_of(namespace)
            if self._belongs(session_id):  # never another user's session
                vectors.sync(self.service, session_id, namespace, self._mirrored(session_id))
        candidates, scores = vectors.candidates(op, query, live)
        return ranked(op, candidates, query, scores)

    def _alive(self, s: Stored, at: datetime) -> bool:
        omit = bool(self.ttl_config and self.ttl_config.get("omit_expired"))
        return not (omit and s.expired(at))

    @staticmethod
    def _refresh(
        items: Iterable[Stored], at: datetime, refresh: dict[tuple[str, ...], dict[str, Stored]]
    ) -> None:
        for s in items:
            moved = s.refreshed(at)
            if moved is not None:
                refresh.setdefault(s.item.namespace, {})[s.item.key] = moved

    # --- reading the ledger -------------------------------------------------------------------------

    def _namespaces(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        """The namespaces at or below `prefix` this user ever wrote to (the directory's entries)."""
        wanted = namespace_prefix(prefix)
        directory = self._read(self._directory, self._directory_mirror)
        return [namespace for key, namespace in directory.items() if key.startswith(wanted)]

    def _live(self, namespace: tuple[str, ...]) -> dict[str, Stored]:
        """The live items of `namespace` by key; none in the empty namespace, whose session id
        is the directory's (langgraph's `get` takes it, and a put refuses it)."""
        if not namespace:
            return {}
        return self._read(self.session_id_of(namespace), self._item_mirror)

    def _items(self, namespace: tuple[str, ...], key: str | None = None) -> list[Stored]:
        """The live items of `namespace` (only `key`'s, when given)."""
        live = self._live(namespace)
        if key is None:
            return list(live.values())
        return [live[key]] if key in live else []

    def _read(self, session_id: str, mirror_of: Callable[[], Mirror[T]]) -> dict[str, T]:
        """The session's live entries by key, `{}` unless it is this user's: its mirror, caught up
        with what the ledger recorded since this process last asked (by any process)."""
        with self._mirrors_lock:
            mirror = self._mirrors.get(session_id)
            if mirror is not None:
                self._mirrors.move_to_end(session_id)
        if mirror is None:
            if not self._belongs(session_id):
                return {}
            with self._mirrors_lock:
                mirror = self._mirrors.setdefault(session_id, mirror_of())
                while len(self._mirrors) > MIRRORED_SESSIONS:
                    self._mirrors.popitem(last=False)
        with mirror.lock:
            mirror.apply(self.service.entry_log(session_id, mirror.entry_type, after=mirror.position))
            return dict(mirror.live)

    def _mirrored(self, session_id: str) -> int | None:
        """The ledger position this process last read the session up to; `None` when not held."""
        with self._mirrors_lock:
            mirror = self._mirrors.get(session_id)
        return None if mirror is None else mirror.position

    @staticmethod
    def _item_mirror() -> Mirror[Stored]:
        return Mirror(ITEM_TYPE, stored)

    @staticmethod
    def _directory_mirror() -> Mirror[tuple[str, ...]]:
        return Mirror(NAMESPACE_TYPE, lambda value, _: tuple(value["namespace"]))

    def session_id_of(self, namespace: tuple[str, ...]) -> str:
        """The ledger session that holds this store's items of `namespace` (for `records`,
        `verify`, `replay` and the rest of the audit tools)."""
        return _session_id(self._user_id, *namespace)

    # --- writing the ledger -------------------------------------------------------------------------

    def _write(
        self,
        plan: _Plan,
        vectors: list[list[float]],
        refresh: dict[tuple[str, ...], dict[str, Stored]],
        at: datetime,
    ) -> None:
        """One append per namespace the batch changes: its puts' entries, its deletes' forget, and
        the items whose expiry a read moved (unless the batch puts them anew). Every namespace's
        records are checked before the first is stored: a value the ledger refuses (not JSON,
        over the payload limit) stores nothing of the batch."""
        by_item: dict[tuple[tuple[str, ...], str], dict[str, list[float]]] = {}
        for (where, path, _), vector in zip(plan.texts, vectors, strict=True):
            by_item.setdefault(where, {})[path] = vector
        changes: dict[tuple[str, ...], tuple[list[str], list[Entry]]] = {}
        for (namespace, key), op in plan.puts.items():
            deleted, written = changes.setdefault(namespace, ([], []))
            refresh.get(namespace, {}).pop(key, None)
            if op.value is None:
                deleted.append(key)
                continue
            item = Item(value=dict(op.value), key=key, namespace=namespace, created_at=at, updated_at=at)
            ttl = None if op.ttl is None else float(op.ttl)
            held = Stored(item, ttl, expiry(at, ttl), by_item.get((namespace, key), {}))
            written.append(Entry(ITEM_TYPE, key, held.payload()))
        for namespace, moved in refresh.items():
            written = changes.setdefault(namespace, ([], []))[1]
            written.extend(Entry(ITEM_TYPE, key, s.refresh_payload()) for key, s in moved.items())
        drafted = []
        for namespace, (deleted, written) in changes.items():
            records: list[Entry | Forget] = [Forget(ITEM_TYPE, keys=tuple(deleted))] if deleted else []
            records.extend(written)
            if records:
                drafted.append((namespace, self._drafted(namespace, records)))
        for namespace, drafts in drafted:
            self._append(namespace, drafts)

    def _drafted(
        self, namespace: tuple[str, ...], records: Sequence[Entry | Forget]
    ) -> tuple[list[Draft], int]:
        """The namespace's records as its append will store them, each checked (`ValueError`
        saying why not; nothing is stored)."""
        return self.service.append_steps.draft_entries(self.session_id_of(namespace), records)

    def _append(self, namespace: tuple[str, ...], drafted: tuple[list[Draft], int]) -> None:
        """Store the namespace's `_drafted` records, making its session (and its directory entry)
        on its first write."""
        session_id = self.session_id_of(namespace)
        if not self._belongs(session_id):
            self._make(self._directory)
            directory = Entry(NAMESPACE_TYPE, namespace_prefix(namespace), {"namespace": list(namespace)})
            self.service.append_entries(self._directory, [directory])
            self._make(session_id)
        self.service.append_steps.store_entries(session_id, *drafted)
        if self._vectors_at is not None:
            self._vectors().sync(self.service, session_id, namespace)

    def _make(self, session_id: str) -> None:
        """Make the user's session `session_id` unless it exists; `ValueError` when it exists and
        is not this user's (or was deleted)."""
        if self._owned.get(session_id):
            return
        try:
            self.service.create_session(self._user_id, session_id=session_id, app_name=APP_NAME, ttl=None)
        except SessionExists:
            if not self._belongs(session_id):
                raise ValueError(
                    f"the store session {session_id!r} cannot be written by user {self._user_id!r}: "
                    "it is another user's, or was deleted"
                ) from None
            return
        self._owned.put(session_id, True)

    def _belongs(self, session_id: str) -> bool:
        """Whether the session exists and is this user's: remembered, else asked (and remembered
        when it is). A namespace's session is thus never made twice, nor its directory entry
        written again, by a store that forgot it or a process that never knew it."""
        if self._owned.get(session_id):
            return True
        if self.service.get_session(session_id, user_id=self._user_id) is None:
            return False
        self._owned.put(session_id, True)
        return True

    def rebuild_vectors(self) -> int:
        """Forget this user's keyed vectors and derive them again from the ledger's records (a
        search catches a namespace up by itself; this is for a vector table restored from an old
        backup, or copied from elsewhere). Returns how many namespaces were rebuilt."""
        if self._vectors_at is None:
            raise ValueError("this LedgerStore has no index, so no vectors to rebuild")
        vectors = self._vectors()
        vectors.vectors.clear(self._user_id)
        namespaces = self._namespaces(())
        for namespace in namespaces:
            session_id = self.session_id_of(namespace)
            if self._belongs(session_id):
                vectors.sync(self.service, session_id, namespace)
        return len(namespaces)

    def _vectors(self) -> ItemVectors:
        """The user's keyed vectors (the store has an index), opened at their first use: opening
        pgvector's connection and schema in the constructor blocked an async handler's loop."""
        with self._vectors_lock:
            if self._item_vectors is None:
                assert self._vectors_at is not None
                self._item_vectors = ItemVectors(_keyed(self._vectors_at), self._user_id)
            return self._item_vectors

    # --- TTL ----------------------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Record the expiry of the items whose time to live has passed; returns how many. Each
        expiry applies only to the entry the sweep read (`store_items.APPLIES_TO`): an item put
        again meanwhile, by any writer, stays."""
        at = now()
        swept = 0
        for namespace in self._namespaces(()):
            expired = [
                Entry(ITEM_TYPE, s.item.key, s.expiry_payload())
                for s in self._items(namespace)
                if s.expired(at)
            ]
            if expired:
                self._append(namespace, self._drafted(namespace, expired))
                swept += len(expired)
        return swept

    def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None) -> concurrent.futures.Future[None]:
        """Sweep every `sweep_interval_minutes` (the `ttl` config's, else 5) on a daemon thread,
        until `stop_ttl_sweeper()`; the future ends when it stops."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if not self.ttl_config or (self._sweeper is not None and self._sweeper.is_alive()):
            future.set_result(None)
            return future
        interval = float(sweep_interval_minutes or self.ttl_config.get("sweep_interval_minutes") or 5) * 60
        self._sweeper_stop.clear()

        def sweep() -> None:
            while not self._sweeper_stop.wait(interval):
                try:
                    self.sweep_ttl()
                except Exception:
                    logger.exception("LedgerStore TTL sweep failed")
            future.set_result(None)

        self._sweeper = threading.Thread(target=sweep, daemon=True, name="ledger-store-ttl-sweeper")
        self._sweeper.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; `False` when it did not stop within `timeout` seconds."""
        if self._sweeper is None:
            return True
        self._sweeper_stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    # --- lifetime -----------------------------------------------------------------------------------

    @property
    def service(self) -> SessionService:
        """The ledger's service (opened now if the store opened none yet): `records`, `verify` and
        `replay` of a namespace's session (`session_id_of`) are its audit trail."""
        if self._sync is None:
            assert self._async is not None  # the constructor set one of them
            self._sync = self._async.synchronous()
        return self._sync

    def close(self) -> None:
        """Stop the sweeper, and close the service and the vectors when the store opened them (a
        store on a given service that is used again opens its vectors again)."""
        self.stop_ttl_sweeper()
        with self._vectors_lock:  # not while another thread opens them
            opened, self._item_vectors = self._item_vectors, None
        if opened is not None and self._owns_vectors:
            opened.vectors.close()
        if self._owns_service and self._async is not None:
            self._async.close()

    async def aclose(self) -> None:
        """`close()` off the event loop (it waits for the calls in flight)."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> LedgerStore:
        """Opens the ledger (and the index's vectors) now, so one that cannot be used fails here,
        not at the first call."""
        self._open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> LedgerStore:
        """Opens the ledger now, on the async service's threads (as `abatch` would): connecting
        (and migrating a new database) blocked the loop of an async handler that made a store per
        request, 26 ms each time on PostgreSQL. A given `SessionService` is open already; the
        index's vectors then open on a thread of the default executor."""
        if self._async is not None:
            await self._async.run(lambda _: self._open())
        elif self._vectors_at is not None:
            await settled(asyncio.to_thread(self._open))
        return self

    def _open(self) -> None:
        """Open the ledger and, with an index, its vectors (both open once)."""
        self.service  # noqa: B018  # the property opens it
        if self._vectors_at is not None:
            self._vectors()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _keyed(at: str | KeyedVectors) -> KeyedVectors:
    """The keyed vectors at a URL (or given), with the way out when PostgreSQL lacks pgvector."""
    if not isinstance(at, str):
        return at
    try:
        return keyed_vectors(at)
    except ExtensionMissing as error:
        raise ExtensionMissing(
            f"{error}; or give LedgerStore vectors='memory://' (vectors in this process, "
            "derived from the ledger) or the URL of a database that has pgvector"
        ) from None


def _checked(ops: Iterable[Op]) -> list[Op]:
    """The ops as a list, each namespace checked (ops given to `batch` directly skip the checks of
    `put`, `get` and the rest)."""
    listed_ops = list(ops)
    for op in listed_ops:
        validate_op_namespace(op)
        if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
            raise ValueError(f"Unknown operation type: {type(op)}")
        if isinstance(op, PutOp):
            check_put(op.namespace, op.key, op.ttl)
    return listed_ops
