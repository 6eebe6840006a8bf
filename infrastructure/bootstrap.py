"""The composition root: settings in, wired adapters out (`open_service()`, `open_storage()`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa
from sessionledger.domain.ports import (
    AccessTokens,
    CounterStore,
    LeaseStore,
    RedeliveryCounts,
    RelayPositions,
)
from sessionledger.infrastructure.ledger.access_tokens import MemoryAccessTokens, SqlAccessTokens
from sessionledger.infrastructure.ledger.appends import create_procedures
from sessionledger.infrastructure.ledger.counters import SqlCounterStore
from sessionledger.infrastructure.ledger.engine import create_ledger_engine, ledger_url
from sessionledger.infrastructure.ledger.leases import MemoryLeaseStore, SqlLeaseStore
from sessionledger.infrastructure.ledger.migrate import current_revision, head_revision, upgrade
from sessionledger.infrastructure.ledger.redeliveries import MemoryRedeliveryCounts, SqlRedeliveryCounts
from sessionledger.infrastructure.ledger.relay_positions import MemoryRelayPositions, SqlRelayPositions
from sessionledger.infrastructure.ledger.sql import SqlLedger
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.service import SessionService
from sessionledger.infrastructure.settings import MEMORY_URL, Settings
from sessionledger.infrastructure.tokens import counter_for

if TYPE_CHECKING:
    from sessionledger.infrastructure.ledger.async_append import AsyncAppend
    from sessionledger.infrastructure.ledger.replicated import ReplicatedLedger
    from sessionledger.infrastructure.loop_appends import LoopAppends
    from sessionledger.infrastructure.policies import PolicyBook


def open_service(
    database_url: str | None = None,
    *,
    broker_url: str | None = None,
    compaction: str = "workers",
    policy: str | Path | None = None,
    **options: Any,
) -> SessionService:
    """A ready service: the schema is created or migrated on open; close it (or use `with`).

    `database_url=None` takes `SESSIONLEDGER_DATABASE_URL`, else the embedded default (the SQLite
    file `./sessionledger.db`); `"memory://"` is a fresh, empty in-memory store on every open.
    `options` override any `Settings` field by name (e.g. `max_payload_bytes=...`).
    `compaction="workers"` leaves compaction to the workers watching the database;
    `"background"` runs the workers' evaluation and compaction on a thread of this process
    (`background_compaction.py`), with `policy` (TOML text or a file's path; `None`: the
    configured `SESSIONLEDGER_POLICY`/`SESSIONLEDGER_POLICY_FILE`, else the built-in default), and
    closing the service drains it. An unknown mode or a bad policy is a `ValueError` here.
    """
    settings, background = service_settings(database_url, broker_url, compaction, policy, options)
    return open_storage(settings, background=background, index_text=True).service


def service_settings(
    database_url: str | None,
    broker_url: str | None,
    compaction: str,
    policy: str | Path | None,
    options: Mapping[str, Any],
) -> tuple[Settings, PolicyBook | None]:
    """`open_service`'s (and `open_async_service`'s) arguments as settings, and the policies of
    its background compactor (`None` for `compaction="workers"`); `ValueError` saying what is
    wrong with them."""
    overrides = dict(options)
    if database_url is not None:
        overrides["database_url"] = database_url
    if broker_url is not None:
        overrides["broker_url"] = broker_url
    settings = Settings(**overrides)
    if compaction == "workers" and policy is None:
        return settings, None  # nothing of the compaction modules is imported
    from sessionledger.infrastructure.background_compaction import (
        background_policies,
        compaction_settings,
    )

    settings = compaction_settings(settings, compaction, policy)
    return settings, background_policies(settings) if compaction == "background" else None


@dataclass(frozen=True)
class Storage:
    """One database as the workers use it: the service on its ledger, and what the workers keep
    beside that ledger (on the same engine, or in the same memory); close it (or use `with`)."""

    service: SessionService
    leases: LeaseStore
    relay_positions: RelayPositions
    counters: CounterStore
    redeliveries: RedeliveryCounts
    access_tokens: AccessTokens
    """The audit page's tokens (`sessionledger token`, `sessionledger serve`)."""
    async_append: Callable[[float, int], AsyncAppend | None] = lambda statement_timeout, connections: None
    """The append from an event loop without a thread, given its statement timeout and how many
    connections of the loop's own it may open (`None`: this ledger has none, as in memory)."""

    def loop_appends(self) -> LoopAppends | None:
        """The HTTP session API's appends from its event loop, token check included
        (`loop_appends.py`), on the settings' statement timeout and up to `pool_size` connections of
        the loop's own; `None` where the ledger has no loop connections (SQLite, memory). Close it
        before the storage."""
        from sessionledger.infrastructure.loop_appends import LoopAppends

        settings = self.service.settings
        fast = self.async_append(settings.statement_timeout, settings.pool_size)
        if fast is None or not isinstance(self.access_tokens, SqlAccessTokens):
            return None
        return LoopAppends(fast, self.access_tokens, self.service.append_steps)

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class NoLedger(LookupError):
    """`open_storage(settings, create=False)` found no ledger that it may read as it is: no SQLite
    file or no schema at the URL, or a schema at another revision (a reader never migrates one)."""


def open_storage(
    settings: Settings,
    *,
    create: bool = True,
    background: PolicyBook | None = None,
    index_text: bool = False,
) -> Storage:
    """The service on the ledger the settings name (counting tokens for their model), and the
    workers' stores built on the same engine (or the same in-memory ledger), the schema up to date.

    `create=False` opens an existing ledger for reading only: nothing is created, migrated or
    written (every transaction is read-only), and `NoLedger` says when there is none to read.
    `memory://` is a fresh, empty ledger either way. With `background` policies, the service
    compacts its sessions on a thread of its own (`background_compaction.py`). `index_text`: this
    process is one that writes and lives on (a service, the relay, an ingest worker), so it keeps
    PostgreSQL's keyword index up on a thread, unless `settings.text_index` is `off`; every other
    opener (a `sessionledger` command, `mcp`, a task worker) leaves the index to those.
    """
    if index_text and not create:
        raise ValueError("a ledger opened for reading only (create=False) cannot run the text indexer")
    storage = _open_storage(settings, create, index_text and settings.text_index == "background")
    if background is not None:
        from sessionledger.infrastructure.background_compaction import compact_in_background

        compact_in_background(storage.service, storage.leases, background)
    return storage


def _open_storage(settings: Settings, create: bool, index_text: bool) -> Storage:
    check_replica_urls(settings)
    counter = counter_for(settings.model)
    if settings.database_url == MEMORY_URL:
        from sessionledger.infrastructure.ledger.memory import MemoryLedger  # not for a SQL ledger

        memory = MemoryLedger()
        return Storage(
            SessionService(memory, settings, counter),
            MemoryLeaseStore(memory),
            MemoryRelayPositions(memory),
            memory.counters,
            MemoryRedeliveryCounts(),
            MemoryAccessTokens(),
        )
    engine = open_engine(settings, create=create)
    primary = SqlLedger(engine, index_in_background=index_text)
    ledger: SqlLedger | ReplicatedLedger
    ledger = _replicated(primary, settings, reading=not create) if settings.read_database_urls else primary
    return Storage(
        SessionService(ledger, settings, counter),
        SqlLeaseStore(engine),
        SqlRelayPositions(engine),
        SqlCounterStore(engine),
        SqlRedeliveryCounts(engine),
        SqlAccessTokens(engine, primary.autocommit),
        ledger.async_append,
    )


def open_engine(settings: Settings, *, create: bool = True) -> sa.Engine:
    """An engine on the database the settings name, its schema brought up to date, or with
    `create=False` a read-only one on a ledger already at this version's schema (`NoLedger`)."""
    engine = create_ledger_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        read_only=not create,
        statement_timeout=settings.statement_timeout,
    )
    try:
        if create:
            if engine.dialect.name == "mysql":
                from sessionledger.infrastructure.ledger.mysql import check_payload_room

                check_payload_room(engine, settings.max_payload_bytes)
            upgrade(engine)
            if engine.dialect.name == "mysql":
                create_procedures(engine)
        else:
            _require_ledger(engine, settings.database_url)
    except BaseException:
        engine.dispose()
        raise
    return engine


def _replicated(primary: SqlLedger, settings: Settings, *, reading: bool) -> ReplicatedLedger:
    """The primary's ledger with its lag-tolerant reads on the settings' replicas (engines that
    connect on first use: a replica down when the service opens is tried later, not a failure)."""
    from sessionledger.infrastructure.ledger.replicas import ReadReplicas, Replica, WriteFence
    from sessionledger.infrastructure.ledger.replicated import ReplicatedLedger

    replicas = [
        Replica(
            url,
            SqlLedger(
                create_ledger_engine(
                    url,
                    pool_size=settings.pool_size,
                    statement_timeout=settings.statement_timeout,
                    read_only=True,
                )
            ),
        )
        for url in settings.read_database_urls
    ]
    fence = WriteFence(primary.engine)
    reads = ReadReplicas(primary, replicas, fence, settings.replica_wait, settings.replica_retry)
    return ReplicatedLedger(reads, reading=reading)


def check_replica_urls(settings: Settings) -> None:
    """`ValueError` unless the ledger and every replica URL are PostgreSQL (streaming replicas are)."""
    if not settings.read_database_urls:
        return
    for url in (settings.database_url, *settings.read_database_urls):
        if url == MEMORY_URL or ledger_url(url).get_backend_name() != "postgresql":
            raise ValueError(
                f"read replicas need a PostgreSQL ledger and PostgreSQL replicas, not {hide_passwords(url)!r}"
            )


def check_database_url(settings: Settings) -> None:
    """`ValueError` saying what is wrong with the settings' database URL and replica URLs, found
    without connecting (a malformed or unsupported URL, a SQLite file in a directory that does not
    exist, replicas of a ledger that is not PostgreSQL)."""
    if settings.database_url != MEMORY_URL:
        create_ledger_engine(settings.database_url).dispose()
    check_replica_urls(settings)


class Migrated(NamedTuple):
    """What `migrate_storage` brought a database to: the ledger's schema revision, the vector
    table's (None where it has none) and, for a PostgreSQL without pgvector, the one-line reason;
    the hash partitions of its session-keyed tables (0: none), and how many they were before."""

    revision: str
    vectors_revision: str | None
    vectors_missing: str
    partitions: int = 0
    partitions_before: int = 0


def migrate_storage(settings: Settings, *, partitions: int | None = None) -> Migrated:
    """Create or upgrade the ledger's schema and the vector table (`sessionledger migrate`; the
    workers reach the migrations only through this composition root). A database without the vector
    extension still gets its ledger, and the reason it has no vector table. With `partitions`, the
    ledger's session-keyed tables are then hash-partitioned by session id into that many
    (`ledger/partitions.py`: PostgreSQL only, else a `ValueError` before anything is created)."""
    from sessionledger.infrastructure.vectors.schema import ExtensionMissing, migrate_vectors

    if partitions is not None:
        from sessionledger.infrastructure.ledger.partitions import check_partitions

        if not settings.database_url.startswith("postgres"):
            raise ValueError("--partitions needs a PostgreSQL ledger (SQLite and memory have no partitions)")
        check_partitions(partitions)
    if settings.database_url == MEMORY_URL:
        return Migrated(head_revision(), None, "")
    engine = open_engine(settings, create=True)
    try:
        before, after = _partition(engine, partitions)
        try:
            vectors, missing = migrate_vectors(engine), ""
        except ExtensionMissing as error:
            vectors, missing = None, str(error)
        return Migrated(head_revision(), vectors, missing, after, before)
    finally:
        engine.dispose()


def _partition(engine: sa.Engine, partitions: int | None) -> tuple[int, int]:
    """The ledger's partition counts before and after partitioning it into `partitions` (None:
    left as it is)."""
    if engine.dialect.name != "postgresql":
        return 0, 0
    from sessionledger.infrastructure.ledger.partitions import partition_count, partition_ledger

    if partitions is not None:
        return partition_ledger(engine, partitions)
    with engine.connect() as connection:
        count = partition_count(connection)
    return count, count


def sqlite_file(database_url: str) -> Path | None:
    """The file a SQLite ledger URL names (`ValueError` for a malformed URL, as `open_storage`
    says it); None for any other ledger and for SQLite's in-memory database."""
    if not database_url.startswith("sqlite"):
        return None
    database = ledger_url(database_url).database
    return Path(database) if database else None


def _require_ledger(engine: sa.Engine, url: str) -> None:
    """`NoLedger` unless the database holds a ledger at the head schema revision; checked without
    creating anything (connecting to a SQLite file that is not there would create it)."""
    shown = hide_passwords(url)
    if engine.dialect.name == "sqlite":
        path = Path(engine.url.database or "")
        if not path.is_file():
            raise NoLedger(f"no ledger at {shown} (no file {path.resolve()})")
    with engine.connect() as connection:
        revision = current_revision(connection)
    if revision is None:
        raise NoLedger(f"no ledger at {shown}")
    if revision != head_revision():
        raise NoLedger(
            f"the ledger at {shown} has schema revision {revision}, not {head_revision()} as this "
            "version needs: `sessionledger migrate` upgrades it (a reading command never does)"
        )
