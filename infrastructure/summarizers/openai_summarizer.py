"""A summarizer that calls any OpenAI-compatible chat-completions endpoint.

OpenAI itself, Azure, vLLM, Ollama, llama.cpp: anything `openai.OpenAI(base_url=...)` can talk to.
Every failure surfaces as one `SummarizerError` that says what went wrong, so the compaction worker
can log it and decide between retrying and dead-lettering without knowing the `openai` package.
"""

from __future__ import annotations

from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from sessionledger.infrastructure.summarizers.chat_spans import chat_span_name, record_reply, record_request
from sessionledger.infrastructure.tracing import Span, SpanKind, traced

# Local OpenAI-compatible servers ignore the key, but the client insists on having one.
PLACEHOLDER_API_KEY = "sessionledger-no-key"


class SummarizerError(RuntimeError):
    """The summarizer could not produce a summary; `retryable` says whether trying later may help."""

    def __init__(self, message: str, *, retryable: bool = False, status_code: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code


class OpenAISummarizer:
    """Plain-text summaries: the model's reply is the summary (`None` when it is blank)."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30,
        max_retries: int = 2,
        max_summary_chars: int | None = None,
        temperature: float | None = 0,
        *,
        client: openai.OpenAI | None = None,
        capture_content: bool = False,
    ) -> None:
        """`temperature=None` leaves it out of the request (reasoning models reject any other value).
        `client` is an `openai.OpenAI` to share (an agent's own, or `offline_client()`) instead of
        one made from `base_url` and `api_key`; it gets this summarizer's timeout and retries, and
        `close()` leaves it open. `capture_content` puts the prompt and the reply on the call's
        span (off by default: they are the users' conversations; the settings turn it on from
        `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`)."""
        if not model:
            raise ValueError("a summarizer model name is required")
        if max_summary_chars is not None and max_summary_chars <= 0:
            raise ValueError("max_summary_chars must be positive")
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_summary_chars = max_summary_chars
        self.temperature = temperature
        self.capture_content = capture_content
        self._owns_client = client is None
        self._client = (
            _client(base_url, api_key, timeout, max_retries)
            if client is None
            else client.with_options(timeout=timeout, max_retries=max_retries)
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def summarize(self, system_prompt: str, user_prompt: str) -> str | None:
        message = self._complete(system_prompt, user_prompt)
        text = (message.content or "").strip()
        if not text:
            return None
        return text if self.max_summary_chars is None else truncate(text, self.max_summary_chars)

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def _complete(self, system_prompt: str, user_prompt: str, **options: Any) -> ChatCompletionMessage:
        """One chat completion, in a GenAI client span (`chat_spans.py`); every way it can fail
        becomes a `SummarizerError`."""
        return traced(
            chat_span_name(self.model),
            lambda span: self._completed(span, system_prompt, user_prompt, options),
            SpanKind.CLIENT,
        )

    def _completed(
        self, span: Span, system_prompt: str, user_prompt: str, options: dict[str, Any]
    ) -> ChatCompletionMessage:
        recording = span.is_recording()
        if recording:
            prompts = (system_prompt, user_prompt) if self.capture_content else None
            record_request(span, self.model, self.base_url, self.temperature, prompts)
        try:
            completion = self._create(system_prompt, user_prompt, options)
        except SummarizerError as error:
            if recording:
                span.set_attribute("error.type", type(error.__cause__ or error).__qualname__)
            raise
        if recording:
            record_reply(span, completion, self.capture_content)
        return self._message(completion)

    def _create(self, system_prompt: str, user_prompt: str, options: dict[str, Any]) -> ChatCompletion:
        if self.temperature is not None:
            options["temperature"] = self.temperature
        try:
            completion: ChatCompletion = self._client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": system_prompt},
                    {"role": "user", "content": user_prompt},
                ],
                **options,
            )
        except openai.APITimeoutError as exc:
            raise SummarizerError(
                f"summarizer request to {self.base_url} timed out after {self.timeout}s "
                f"(tried {self.max_retries + 1} times)",
                retryable=True,
            ) from exc
        except openai.APIConnectionError as exc:
            raise SummarizerError(
                f"cannot reach the summarizer at {self.base_url}: {exc.__cause__ or exc}", retryable=True
            ) from exc
        except openai.APIStatusError as exc:
            raise SummarizerError(
                f"summarizer returned HTTP {exc.status_code} from {self.base_url}: {exc.message}",
                retryable=exc.status_code in (408, 409, 429) or exc.status_code >= 500,
                status_code=exc.status_code,
            ) from exc
        except (openai.APIError, ValueError) as exc:
            raise SummarizerError(
                f"malformed response from the summarizer at {self.base_url}: {exc}"
            ) from exc
        return completion

    def _message(self, completion: ChatCompletion) -> ChatCompletionMessage:
        if not getattr(completion, "choices", None):
            raise SummarizerError(f"the summarizer at {self.base_url} returned no choices")
        message = completion.choices[0].message
        if message.refusal:
            raise SummarizerError(f"the model refused to summarize: {message.refusal}")
        return message


def truncate(text: str, max_chars: int) -> str:
    """Cut at a word boundary and mark the cut with an ellipsis; short texts are returned unchanged."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space > max_chars // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _client(base_url: str | None, api_key: str | None, timeout: float, max_retries: int) -> openai.OpenAI:
    """The client: with the given key, else the one the `openai` package finds itself, else (for a
    server at a given base URL, which a local one needs no key for) a placeholder."""
    try:
        return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
    except openai.OpenAIError:  # no key given, and the package found none
        if not base_url:
            raise ValueError(
                "no OpenAI API key and no base URL: set OPENAI_API_KEY or OPENAI_BASE_URL"
            ) from None
    return openai.OpenAI(
        base_url=base_url, api_key=PLACEHOLDER_API_KEY, timeout=timeout, max_retries=max_retries
    )
