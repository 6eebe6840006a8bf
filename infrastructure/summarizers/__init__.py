"""Summarizer adapters for the domain's `Summarizer` port."""

from sessionledger.infrastructure.summarizers.extractive import ExtractiveSummarizer
from sessionledger.infrastructure.summarizers.factory import summarizer_from_settings
from sessionledger.infrastructure.summarizers.openai_summarizer import OpenAISummarizer, SummarizerError
from sessionledger.infrastructure.summarizers.structured import StructuredSummarizer, StructuredSummary

__all__ = [
    "ExtractiveSummarizer",
    "OpenAISummarizer",
    "StructuredSummarizer",
    "StructuredSummary",
    "SummarizerError",
    "summarizer_from_settings",
]
