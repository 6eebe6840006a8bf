"""Chooses the summarizer from configuration: an OpenAI-compatible endpoint if one is configured,
otherwise the offline extractive one (and says so, since its summaries are much cruder)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from sessionledger.domain.ports import Summarizer
from sessionledger.infrastructure.summarizers.extractive import ExtractiveSummarizer
from sessionledger.infrastructure.summarizers.openai_summarizer import OpenAISummarizer
from sessionledger.infrastructure.summarizers.structured import StructuredSummarizer

log = logging.getLogger(__name__)

DEFAULT_SUMMARIZER_MODEL = "gpt-4o-mini"

# setting name -> environment variables tried in order when the setting is absent or None.
_ENVIRONMENT: Mapping[str, tuple[str, ...]] = {
    "openai_base_url": ("SESSIONLEDGER_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
    "openai_api_key": ("SESSIONLEDGER_OPENAI_API_KEY", "OPENAI_API_KEY"),
    "summarizer_model": ("SESSIONLEDGER_SUMMARIZER_MODEL",),
    "summarizer_timeout": ("SESSIONLEDGER_SUMMARIZER_TIMEOUT",),
    "summarizer_max_retries": ("SESSIONLEDGER_SUMMARIZER_MAX_RETRIES",),
    "summarizer_structured": ("SESSIONLEDGER_SUMMARIZER_STRUCTURED",),
}


def summarizer_from_settings(
    settings: object | None = None, *, environ: Mapping[str, str] | None = None
) -> Summarizer:
    """The configured summarizer.

    `settings` is anything with the attributes named in `_ENVIRONMENT` (the project's `Settings`, a
    namespace, or `None`); a missing or `None` attribute falls back to the environment. With a base
    URL or an API key: `OpenAISummarizer` (`StructuredSummarizer` when `summarizer_structured` is true);
    with neither: `ExtractiveSummarizer`, logged as offline.
    """
    env = os.environ if environ is None else environ

    def setting(name: str) -> Any:
        value = getattr(settings, name, None)
        if value is None:
            value = next((env[var] for var in _ENVIRONMENT[name] if env.get(var)), None)
        return value

    base_url, api_key = setting("openai_base_url"), setting("openai_api_key")
    if not base_url and not api_key:
        log.info("no OpenAI endpoint (OPENAI_BASE_URL, OPENAI_API_KEY): summaries are offline and extractive")
        return ExtractiveSummarizer()
    kind = StructuredSummarizer if _flag(setting("summarizer_structured")) else OpenAISummarizer
    summarizer = kind(
        model=setting("summarizer_model") or DEFAULT_SUMMARIZER_MODEL,
        base_url=base_url or None,
        api_key=api_key or None,
        timeout=float(_or_default(setting("summarizer_timeout"), 30)),
        max_retries=int(_or_default(setting("summarizer_max_retries"), 2)),
    )
    log.info("summaries by %s at %s (model %s)", kind.__name__, summarizer.base_url, summarizer.model)
    return summarizer


def _or_default(value: object, default: object) -> object:
    return default if value is None or value == "" else value


def _flag(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
