"""The one settings object: read from the environment here, and nowhere else, then handed down."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
)
from sessionledger.domain.sessions import check_ttl
from sessionledger.infrastructure.queue_names import DEFAULT_PARTITIONS, DEFAULT_PREFIX, QueueNames

DEFAULT_DATABASE_URL = "sqlite:///./sessionledger.db"
MEMORY_URL = "memory://"
DEFAULT_MODEL = "gpt-4o"


class Settings(BaseSettings):
    """Every knob of a deployment, each with its one default; environment prefix `SESSIONLEDGER_`.

    The composition roots build it once (`open_service(**options)`, the command line, a worker
    process start) with their overrides by field name, and pass it to everything they build.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONLEDGER_", extra="forbid", populate_by_name=True, env_ignore_empty=True
    )

    # --- the ledger ---------------------------------------------------------------------------
    database_url: str = DEFAULT_DATABASE_URL
    broker_url: str | None = None
    """The queue between the relay and the workers (both need one). A service publishes nothing
    itself, whatever this is: workers on its database compact what it writes (docs/api.md)."""
    max_payload_bytes: int = Field(default=1024 * 1024, gt=0)
    """The largest event payload (canonical JSON, utf-8 bytes) an append accepts."""
    session_ttl: timedelta | None = None
    """How long a session lives when its creator gives no `ttl` (seconds, or ISO-8601 such as `P30D`):
    by default none, so nothing expires unless asked; expiry deletes the session and erases its messages."""
    compaction_attempts: int = Field(default=5, gt=0)
    """How often `compact()` re-reads after losing a window race before `ConcurrencyConflict`."""
    sqlite_busy_timeout_ms: int = Field(default=30_000, ge=0)
    pool_size: int = Field(default=5, gt=0)
    async_threads: int | None = Field(default=None, gt=0)
    """The threads `AsyncSessionService` runs the synchronous service's calls on (default
    `pool_size`). Each is one more thread running Python that the event loop waits on for the GIL:
    an agent's loop keeps its largest stall near an idle loop's with 1, while its appends on
    PostgreSQL and MariaDB still use `pool_size` connections of the loop's own."""
    statement_timeout: float = Field(default=30.0, gt=0)
    """Seconds any one database statement may run before it is cancelled (PostgreSQL's
    `statement_timeout`; a progress handler on SQLite), so no single request exhausts the database."""
    read_database_url: str | None = None
    """Streaming replicas of the PostgreSQL ledger, one URL or several separated by commas: the reads
    that tolerate lag (audit snapshots, searches, session lists) go to them (docs/scaling.md)."""
    replica_wait: float = Field(default=0.05, ge=0)
    """Seconds a replica read waits for the replica to replay this process's own writes before the
    read goes to the primary instead (read-your-writes)."""
    replica_retry: float = Field(default=10.0, gt=0)
    """Seconds a replica that could not be reached is left out before it is tried again."""
    text_index: Literal["background", "off"] = "background"
    """PostgreSQL's keyword index (`ledger_text`), filled behind the writes: `background` runs its
    indexer in the writing processes (`open_service()`, the relay, ingest workers), `off` in none
    of this process's, so that an operator chooses where it runs. Searches are right either way:
    they scan what the index has not reached. SQLite's index is written with each append."""

    # --- tokens, summaries and policies ---------------------------------------------------------
    model: str = DEFAULT_MODEL
    """The model whose tokenizer counts tokens and whose context window `context_window` triggers use."""
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("SESSIONLEDGER_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("SESSIONLEDGER_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    summarizer_model: str = "gpt-4o-mini"
    summarizer_timeout: float = Field(default=30.0, gt=0)
    summarizer_max_retries: int = Field(default=2, ge=0)
    summarizer_structured: bool = False
    """Structured summaries in Sentinel's schema (an OpenAI-compatible endpoint is needed)."""
    policy_file: Path | None = None
    """A TOML file of per-application compaction policies."""
    policy: str | None = None
    """Policies inline, same TOML; its apps win over the file's."""

    # --- the queue and the workers --------------------------------------------------------------
    queue_prefix: str = DEFAULT_PREFIX
    partitions: int = Field(default=DEFAULT_PARTITIONS, ge=1)
    queue_type: Literal["classic", "quorum"] = "classic"
    """RabbitMQ's queue type: `quorum` replicates every queue over the cluster's nodes (the
    publisher's and the workers' must match; a queue keeps the type it was declared with)."""
    ingest_chunk: int = Field(default=2000, ge=1)
    """Events per ledger transaction in the ingest task: by default what a publisher's message holds
    at most (`EventPublisher`'s `max_batch_events`), so that a message is one transaction."""
    task_soft_time_limit: int = Field(default=240, gt=0)
    task_time_limit: int = Field(default=300, gt=0)
    ingest_patience: int = Field(default=600, gt=0)
    """Seconds an ingest batch waits in place for the database before going back to its queue."""
    redelivery_horizon: int = Field(default=1800, gt=0)
    """Seconds before the broker redelivers an unacked message: RabbitMQ's consumer_timeout, and Redis'
    visibility_timeout, which workers set to it (how long a crashed worker's batch stays invisible)."""
    max_retries: int = Field(default=5, ge=0)
    database_retry_window: int = Field(default=180, gt=0)
    """Seconds a task keeps retrying while the database is unreachable (a failover, a restart)
    before it is dead-lettered, whatever `max_retries` says."""
    retry_backoff: int = Field(default=5, gt=0)
    """First retry delay in seconds; doubles per retry, capped by `retry_backoff_max`, jittered."""
    retry_backoff_max: int = Field(default=600, gt=0)
    lease_seconds: int | None = None
    """How long a compaction claims its session; default: the hard time limit plus a minute."""
    relay_interval: float = Field(default=0.5, gt=0)
    relay_batch: int = Field(default=5000, gt=0)
    relay_gap_timeout: float = Field(default=5.0, gt=0)
    sweep_interval: float = Field(default=3600.0, gt=0)
    digest_every: float | None = Field(default=None, gt=0)
    """Seconds between the ledger digests the relay writes (none by default; docs/proofs.md)."""
    digest_dir: Path | None = None
    """Where the relay writes its digests (`digest_every` needs it): keep it off the database host."""
    digest_sign_key: Path | None = None
    """The Ed25519 private key (a PEM file, as `sessionledger keygen` writes) the relay signs its
    digests with, so that they pass where `digest_public_key` is trusted (`digest_every` needs it)."""
    digest_public_key: str | None = None
    """The trusted Ed25519 public key of digests (a PEM file's path, or the PEM itself): `verify
    --digest`/`--since` and `check-proof` refuse a digest it did not sign (docs/proofs.md)."""
    log_format: str = "json"
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    """Where the relay's `/metrics` listens: this machine only, unless told (`0.0.0.0` in a container
    whose port is published); it needs no token, and each request reads the database and the broker."""
    otel_instrumentation_genai_capture_message_content: bool = Field(
        default=False,
        validation_alias=AliasChoices(
            "SESSIONLEDGER_OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        ),
    )
    """OpenTelemetry's GenAI variable (also read un-prefixed, its own name): the summarizer's
    prompt and reply on its span (`true`, `span_only` or `span_and_event`); off by default, as
    they are the users' conversations."""
    otel_instrument: Annotated[frozenset[Literal["celery", "sqlalchemy"]], NoDecode] = frozenset()
    """OpenTelemetry instrumentations the command line's processes turn on besides the library's
    own spans (`SESSIONLEDGER_OTEL_INSTRUMENT=celery,sqlalchemy`; the `otel` extra): Celery's task
    spans and SQLAlchemy's statement spans. Off by default: a statement span per query is a lot."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The arguments over the environment, then a `.env` file and a secrets directory only
        when the caller names one (`Settings(_env_file=...)`, `_secrets_dir=...`, or a subclass's
        `model_config`): with none named, pydantic-settings' sources for them still walk every
        field to find nothing, 40% of building the settings, which `open_service(url)` and
        `LedgerSaver(url)` do on the caller's thread (an async handler's event loop)."""
        sources = [init_settings, env_settings]
        if isinstance(dotenv_settings, DotEnvSettingsSource) and dotenv_settings.env_file:
            sources.append(dotenv_settings)
        if isinstance(file_secret_settings, SecretsSettingsSource) and file_secret_settings.secrets_dir:
            sources.append(file_secret_settings)
        return tuple(sources)

    @field_validator("otel_instrumentation_genai_capture_message_content", mode="before")
    @classmethod
    def _capture_modes(cls, value: object) -> object:
        """The GenAI conventions' modes: the span gets the content in `span_only` and `span_and_event`
        (and the older `true`); `event_only`, `no_content` and anything else leave it off."""
        if isinstance(value, str):
            return value.strip().lower() in {"true", "span_only", "span_and_event"}
        return value

    @field_validator("otel_instrument", mode="before")
    @classmethod
    def _names_as_text(cls, value: object) -> object:
        """`celery,sqlalchemy` as the environment writes a set of names."""
        if isinstance(value, str):
            return {name.strip() for name in value.split(",") if name.strip()}
        return value

    @field_validator("session_ttl", mode="before")
    @classmethod
    def _seconds_as_text(cls, value: object) -> object:
        """A number of seconds written as text (`SESSIONLEDGER_SESSION_TTL=2592000`), which pydantic's
        own parsing of a duration string refuses."""
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return value
        return value

    @field_validator("session_ttl")
    @classmethod
    def _positive_ttl(cls, value: timedelta | None) -> timedelta | None:
        return check_ttl(value, "session_ttl")

    @model_validator(mode="after")
    def _limits_below_horizon(self) -> Settings:
        if self.task_soft_time_limit >= self.task_time_limit:
            raise ValueError("task_soft_time_limit must be below task_time_limit")
        # a reserved message may wait for one running task before its own run: two limits must fit
        longest = max(self.task_time_limit, self.ingest_patience)
        if 2 * longest >= self.redelivery_horizon:
            raise ValueError(
                f"time limits ({longest}s) must stay below half the broker's redelivery horizon "
                f"({self.redelivery_horizon}s), or a slow task would be delivered twice"
            )
        return self

    @property
    def read_database_urls(self) -> tuple[str, ...]:
        """The replicas `read_database_url` names, in order (none when it is unset)."""
        if self.read_database_url is None:
            return ()
        return tuple(url.strip() for url in self.read_database_url.split(",") if url.strip())

    @property
    def queue_names(self) -> QueueNames:
        return QueueNames(self.queue_prefix, self.partitions, self.queue_type)

    @property
    def lease(self) -> int:
        return self.lease_seconds or self.task_time_limit + 60
