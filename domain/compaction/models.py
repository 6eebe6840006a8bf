"""Context-window sizes of OpenAI chat models, for `ContextWindowTrigger.for_model`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sessionledger.domain.tokens import base_model_name

CONTEXT_WINDOWS: Mapping[str, int] = MappingProxyType(
    {
        "gpt-3.5-turbo": 16_385,
        "gpt-4": 8_192,
        "gpt-4-32k": 32_768,
        "gpt-4-turbo": 128_000,
        "gpt-4o": 128_000,
        "gpt-4.1": 1_047_576,
        "gpt-4.5": 128_000,
        "gpt-5": 400_000,
        "o1": 200_000,
        "o3": 200_000,
        "o4-mini": 200_000,
    }
)
"""Model-name prefix -> context window in tokens; the longest matching prefix wins."""


def context_window_for(model: str) -> int:
    """The context window of `model` (`"gpt-4o-mini"`, `"gpt-4.1-2025-04-14"`, a provider's
    `"openai/gpt-4o"` or a fine-tuned `"ft:gpt-4o-mini-2024-07-18:org::id"`, as the token counter
    takes them)."""
    if not isinstance(model, str):
        raise ValueError(f"model must be a model name, not {model!r}")
    name = base_model_name(model)
    prefixes = [prefix for prefix in CONTEXT_WINDOWS if name.startswith(prefix)]
    if not prefixes:
        raise ValueError(
            f"unknown model {model!r}: no context window known for it; known prefixes: "
            f"{', '.join(sorted(CONTEXT_WINDOWS))} (or pass context_window explicitly)"
        )
    return CONTEXT_WINDOWS[max(prefixes, key=len)]
