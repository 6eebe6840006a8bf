"""Chooses the summarizer from the settings: an OpenAI-compatible endpoint if one is configured,
otherwise the offline extractive one (and says so, since its summaries are much cruder)."""

from __future__ import annotations

import logging

from sessionledger.domain.compaction.ports import Summarizer
from sessionledger.infrastructure.settings import Settings
from sessionledger.infrastructure.summarizers.extractive import ExtractiveSummarizer
from sessionledger.infrastructure.summarizers.openai_summarizer import OpenAISummarizer
from sessionledger.infrastructure.summarizers.structured import StructuredSummarizer

log = logging.getLogger(__name__)


def summarizer_from_settings(settings: Settings) -> Summarizer:
    """The configured summarizer.

    With a base URL or an API key (`openai_base_url`, `openai_api_key`: `SESSIONLEDGER_OPENAI_*`,
    else the `openai` package's own `OPENAI_BASE_URL` / `OPENAI_API_KEY`): `OpenAISummarizer`
    (`StructuredSummarizer` when `summarizer_structured` is true); with neither:
    `ExtractiveSummarizer`, logged as offline.
    """
    base_url, api_key = settings.openai_base_url, settings.openai_api_key
    if not base_url and not api_key:
        log.info("no OpenAI endpoint (OPENAI_BASE_URL, OPENAI_API_KEY): summaries are offline and extractive")
        return ExtractiveSummarizer()
    kind = StructuredSummarizer if settings.summarizer_structured else OpenAISummarizer
    summarizer = kind(
        model=settings.summarizer_model,
        base_url=base_url,
        api_key=api_key,
        timeout=settings.summarizer_timeout,
        max_retries=settings.summarizer_max_retries,
        capture_content=settings.otel_instrumentation_genai_capture_message_content,
    )
    log.info("summaries by %s at %s (model %s)", kind.__name__, summarizer.base_url, summarizer.model)
    return summarizer
