"""Configuration from the environment (prefix `SESSIONLEDGER_`), or from keyword arguments."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./sessionledger.db"
MEMORY_URL = "memory://"


class Settings(BaseSettings):
    """Every knob of a deployment; `open_service(**options)` overrides any of them by name."""

    model_config = SettingsConfigDict(env_prefix="SESSIONLEDGER_", extra="forbid")

    database_url: str = DEFAULT_DATABASE_URL
    broker_url: str | None = None
    max_payload_bytes: int = Field(default=1024 * 1024, gt=0)
    """The largest event payload (canonical JSON, utf-8 bytes) an append accepts."""
    compaction_attempts: int = Field(default=5, gt=0)
    """How often `compact()` re-reads after losing a window race before `ConcurrencyConflict`."""
    sqlite_busy_timeout_ms: int = Field(default=30_000, ge=0)
    pool_size: int = Field(default=5, gt=0)
    policy_file: Path | None = None
    model: str = "gpt-4o"
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    summarizer_model: str | None = None
    summarizer_timeout: float | None = None
    summarizer_max_retries: int | None = None
    summarizer_structured: bool = False
    """Structured summaries in Sentinel's schema (an OpenAI-compatible endpoint is needed)."""
