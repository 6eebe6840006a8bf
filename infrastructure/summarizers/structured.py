"""Structured summaries in Sentinel AI's default schema, through OpenAI structured outputs.

The model must answer with JSON that matches the schema (`response_format` json_schema, strict); we
validate it again ourselves, because OpenAI-compatible servers differ in how strictly they enforce it.
`summarize()` returns the validated JSON text, so the synthetic summary event keeps the whole
structure (title, keywords, facts) and `domain.prompting.facts_block` can inject it later.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sessionledger.domain.json_text import read_json
from sessionledger.infrastructure.summarizers.openai_summarizer import (
    OpenAISummarizer,
    SummarizerError,
    truncate,
)


class Sentiment(StrEnum):
    POSITIVE = "positive"
    NEUTRAL = "neutral"
    NEGATIVE = "negative"


class StructuredSummary(BaseModel):
    """Sentinel AI's default summary schema."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str
    keywords: list[str]
    summary: str
    key_points: list[str]
    key_facts: list[str]
    sentiment: Sentiment
    confidence: float = Field(ge=0, le=10)


def _strings(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "3 to 10 words, sentence case, no trailing period"},
        "keywords": _strings("1 to 3 one-word topics of the conversation"),
        "summary": {
            "type": "string",
            "description": "2 to 5 sentences in a neutral tone: what was asked, done and decided",
        },
        "key_points": _strings("the takeaways, most important first"),
        "key_facts": _strings(
            "objective facts stated in the conversation: names, numbers, decisions, preferences"
        ),
        "sentiment": {"type": "string", "enum": [s.value for s in Sentiment], "description": "overall tone"},
        "confidence": {
            "type": "number",
            "minimum": 0,
            "maximum": 10,
            "description": "your confidence that the summary is faithful, 0 to 10",
        },
    },
    "required": ["title", "keywords", "summary", "key_points", "key_facts", "sentiment", "confidence"],
    "additionalProperties": False,
}

RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "session_summary", "strict": True, "schema": SUMMARY_SCHEMA},
}

DEFAULT_INSTRUCTIONS = (
    "Answer with a single JSON object that follows the session_summary schema: a short title, one to "
    "three keywords, the summary itself, the key points and the key facts worth remembering, the overall "
    "sentiment and your confidence from 0 to 10. No text outside the JSON."
)

DEFAULT_MAX_SUMMARY_CHARS = 1000
"""Sentinel's `maxSummaryLength`."""


class StructuredSummarizer(OpenAISummarizer):
    """Like `OpenAISummarizer`, but the reply must be a `StructuredSummary`; returns its JSON text.

    `instructions` are appended to the strategy's system prompt; `max_summary_chars` bounds the
    `summary` field (asked of the model, then enforced).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30,
        max_retries: int = 2,
        max_summary_chars: int | None = DEFAULT_MAX_SUMMARY_CHARS,
        temperature: float | None = 0,
        instructions: str = DEFAULT_INSTRUCTIONS,
        *,
        client: openai.OpenAI | None = None,
        capture_content: bool = False,
    ) -> None:
        super().__init__(
            model,
            base_url,
            api_key,
            timeout,
            max_retries,
            max_summary_chars,
            temperature,
            client=client,
            capture_content=capture_content,
        )
        self.instructions = instructions

    def summarize(self, system_prompt: str, user_prompt: str) -> str | None:
        structured = self.summarize_structured(system_prompt, user_prompt)
        return None if structured is None else structured.model_dump_json()

    def summarize_structured(self, system_prompt: str, user_prompt: str) -> StructuredSummary | None:
        """The validated summary; `None` when the model answered with nothing."""
        message = self._complete(
            self._system_prompt(system_prompt), user_prompt, response_format=RESPONSE_FORMAT
        )
        content = (message.content or "").strip()
        if not content:
            return None
        summary = parse_summary(content)
        if not summary.summary.strip():
            return None
        if self.max_summary_chars is not None:
            summary = summary.model_copy(
                update={"summary": truncate(summary.summary, self.max_summary_chars)}
            )
        return summary

    def _system_prompt(self, system_prompt: str) -> str:
        parts = [system_prompt, self.instructions]
        if self.max_summary_chars is not None:
            parts.append(f"Keep the summary field under {self.max_summary_chars} characters.")
        return "\n\n".join(part for part in parts if part)


def parse_summary(content: str) -> StructuredSummary:
    """Parse and validate a model's JSON answer; `SummarizerError` says which of the two failed."""
    try:
        data = read_json(content)
    except json.JSONDecodeError as exc:
        raise SummarizerError(f"the summarizer returned malformed JSON ({exc}): {content[:200]!r}") from exc
    try:
        return StructuredSummary.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors())
        raise SummarizerError(f"the summarizer's JSON does not match the summary schema: {problems}") from exc
