"""Summarizer adapters for the domain's `Summarizer` port."""

from infrastructure.summarizers.extractive import ExtractiveSummarizer
from infrastructure.summarizers.factory import summarizer_from_settings
from infrastructure.summarizers.openai_summarizer import OpenAISummarizer, SummarizerError
from infrastructure.summarizers.structured import StructuredSummarizer, StructuredSummary

__all__ = [
    "ExtractiveSummarizer",
    "OpenAISummarizer",
    "StructuredSummarizer",
    "StructuredSummary",
    "SummarizerError",
    "summarizer_from_settings",
]
