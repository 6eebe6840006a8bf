"""The summarizer's model call as an OpenTelemetry GenAI client span (`chat {model}`).

Attributes follow the GenAI semantic conventions: the operation, the provider, the requested and
answering model, the server, token usage and finish reasons. The prompt and the reply are user
data: they are recorded (`gen_ai.system_instructions`, `gen_ai.input.messages`,
`gen_ai.output.messages`) only when `capture` says so: the summarizer's `capture_content`, which
the settings set from the conventions' own variable, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from openai.types.chat import ChatCompletion
from sessionledger.infrastructure.tracing import Span

__all__ = ["chat_span_name", "record_reply", "record_request"]


def chat_span_name(model: str) -> str:
    return f"chat {model}"


def record_request(
    span: Span,
    model: str,
    base_url: str,
    temperature: float | None,
    prompts: tuple[str, str] | None,
) -> None:
    """The request's attributes: the server by host and port only (never a URL's credentials);
    `prompts` (system, user) only when content is captured."""
    address = urlsplit(base_url)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
    }
    if address.hostname:
        attributes["server.address"] = address.hostname
    if address.port is not None:
        attributes["server.port"] = address.port
    if temperature is not None:
        attributes["gen_ai.request.temperature"] = temperature
    if prompts is not None:
        system_prompt, user_prompt = prompts
        attributes["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system_prompt}])
        attributes["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": user_prompt}]}]
        )
    span.set_attributes(attributes)


def record_reply(span: Span, completion: ChatCompletion, capture: bool) -> None:
    """The reply's attributes: which model answered, its usage and why it stopped; its text
    only with `capture`."""
    attributes: dict[str, Any] = {
        "gen_ai.response.model": completion.model,
        "gen_ai.response.id": completion.id,
    }
    choices = completion.choices or []
    attributes["gen_ai.response.finish_reasons"] = [str(choice.finish_reason) for choice in choices]
    usage = completion.usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
    if capture:
        attributes["gen_ai.output.messages"] = json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": choice.message.content or ""}],
                    "finish_reason": str(choice.finish_reason),
                }
                for choice in choices
            ]
        )
    span.set_attributes(attributes)
