"""Token counters, and the one of requests built by hand: plugged in from outside, so the domain
imports no adapter."""

from __future__ import annotations

from collections.abc import Callable

TokenCounter = Callable[[str], int]
"""Counts the tokens of one string; `len` is a valid (crude) counter."""

_fallback: Callable[[], TokenCounter] | None = None


def use_fallback_counter(factory: Callable[[], TokenCounter]) -> None:
    """Name the counter of requests that carry none; the `sessionledger` package plugs in tiktoken's.

    Services and workers never need it: every request they build carries their own counter.
    """
    global _fallback
    _fallback = factory


def fallback_counter() -> TokenCounter:
    """The plugged-in counter (asked each time, so the factory decides what to cache)."""
    if _fallback is None:
        raise RuntimeError(
            "no token counter: build the CompactionRequest with counter=..., or give the trigger or "
            "strategy an estimator"
        )
    return _fallback()


def base_model_name(model: str) -> str:
    """The OpenAI model a name stands for, lowercased: a provider prefix (`openai/gpt-4o`) dropped,
    a fine-tuned model (`ft:gpt-4o-mini-2024-07-18:org::id`) its base model. Its token encoding
    and its context window are those of that model."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name[3:].split(":", 1)[0] if name.startswith("ft:") else name
