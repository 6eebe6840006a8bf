"""Per-application compaction policies, from configuration only (no code).

A policy is a trigger (when) and a strategy (what), written as TOML tables, in the file named by
the settings' `policy_file` (`SESSIONLEDGER_POLICY_FILE`) and/or inline in their `policy`
(`SESSIONLEDGER_POLICY`; same format, its apps win):

    [apps.default]
    trigger = { type = "turns", max_turns = 20 }
    strategy = { type = "recursive", max_events_to_keep = 10, overlap_size = 2 }

    [apps.support]
    trigger = { type = "any_of", triggers = [
        { type = "context_window", model = "gpt-4o", percentage = 60 },
        { type = "turns", max_turns = 40 } ] }
    strategy = { type = "sliding", max_events = 30 }

    [apps.audit]
    enabled = false

Triggers: `turns` (max_turns), `tokens` (threshold), `context_window` (model or context_window,
percentage), `events` (interval), `any_of` (triggers). Strategies: `recursive` (max_events_to_keep,
overlap_size, system_prompt, shadow_prompt), `sliding` (max_events), `turns` (max_turns), `tokens`
(max_tokens), `adk` (compaction_interval, overlap_size), `adk_tokens` (token_threshold,
event_retention_size). An app without a table of its own uses `apps.default`; without any
configuration every app gets `DEFAULT_POLICY`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessionledger.domain.compaction import (
    AdkSlidingWindowStrategy,
    AdkTokenThresholdStrategy,
    AnyOf,
    ContextWindowTrigger,
    EventCountTrigger,
    RecursiveSummarizationStrategy,
    SlidingWindowStrategy,
    TokenCountStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
    TurnWindowStrategy,
    context_window_for,
)
from sessionledger.domain.compaction.ports import Summarizer
from sessionledger.infrastructure.settings import DEFAULT_MODEL, Settings

DEFAULT_APP = "default"
DEFAULT_POLICY: Mapping[str, Any] = {
    "trigger": {
        "type": "any_of",
        "triggers": [
            {"type": "turns", "max_turns": 20},
            {"type": "context_window", "percentage": 60},
        ],
    },
    "strategy": {"type": "recursive", "max_events_to_keep": 10, "overlap_size": 2},
}
"""Compact a conversation past 20 turns or 60% of the model's context, keeping the last 10 events."""


@dataclass(frozen=True)
class Policy:
    """One application's trigger and strategy.

    `token_threshold` is the smallest token count at which the trigger can fire (None when it does
    not count tokens): below it the evaluator need not count the window's tokens.
    """

    app_name: str
    trigger: Any
    strategy: Any
    token_threshold: int | None


class PolicyBook:
    """The policies of every application; `for_app` falls back to the `default` app's."""

    def __init__(self, policies: Mapping[str, Policy | None]) -> None:
        self._policies = dict(policies)

    def for_app(self, app_name: str) -> Policy | None:
        """The app's policy; None when compaction is disabled for it."""
        if app_name in self._policies:
            return self._policies[app_name]
        return self._policies.get(DEFAULT_APP)


def load_policies(
    summarizer: Callable[[], Summarizer],
    *,
    policy_file: str | Path | None = None,
    inline: str | None = None,
    model: str = DEFAULT_MODEL,
) -> PolicyBook:
    """Read the configured policies and build them; `ValueError` naming the faulty setting.

    `summarizer` is called (once) only if a strategy needs one; `model` is the default for
    `context_window` triggers that name none.
    """
    apps: dict[str, tuple[Any, str]] = {}
    if policy_file:
        path = Path(policy_file)
        try:
            text = path.read_text()
        except OSError as error:
            raise ValueError(f"cannot read policy file {path}: {error}") from None
        apps.update(_apps(_toml(text, str(path)), str(path)))
    if inline:
        apps.update(_apps(_toml(inline, "SESSIONLEDGER_POLICY"), "SESSIONLEDGER_POLICY"))
    if not apps:
        apps = {DEFAULT_APP: (DEFAULT_POLICY, "the built-in default policy")}
    builder = _Builder(summarizer, model)
    return PolicyBook({name: builder.policy(name, table, source) for name, (table, source) in apps.items()})


def policies_from_settings(summarizer: Callable[[], Summarizer], settings: Settings) -> PolicyBook:
    """`load_policies` with the deployment's settings (`policy_file`, `policy`, `model`)."""
    return load_policies(
        summarizer, policy_file=settings.policy_file, inline=settings.policy, model=settings.model
    )


def _toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{source}: not valid TOML: {error}") from None


def _apps(document: Mapping[str, Any], source: str) -> dict[str, tuple[Any, str]]:
    unknown = set(document) - {"apps"}
    if unknown:
        raise ValueError(f"{source}: unknown top-level keys {sorted(unknown)}; expected [apps.<name>] tables")
    apps = document.get("apps", {})
    if not isinstance(apps, Mapping):
        raise ValueError(f"{source}: 'apps' must be a table of [apps.<name>] tables")
    return {name: (table, source) for name, table in apps.items()}


class _Builder:
    def __init__(self, summarizer: Callable[[], Summarizer], model: str) -> None:
        self._make_summarizer = summarizer
        self._summarizer: Summarizer | None = None
        self._model = model

    def summarizer(self) -> Summarizer:
        if self._summarizer is None:
            self._summarizer = self._make_summarizer()
        return self._summarizer

    def policy(self, app_name: str, table: Any, source: str) -> Policy | None:
        where = f"{source}: apps.{app_name}"
        if not isinstance(table, Mapping):
            raise ValueError(f"{where} must be a table")
        unknown = set(table) - {"enabled", "trigger", "strategy"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}; expected trigger, strategy, enabled")
        enabled = table.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ValueError(f"{where}.enabled must be true or false, not {enabled!r}")
        if not enabled:
            return None
        if "trigger" not in table or "strategy" not in table:
            raise ValueError(f"{where} needs both a trigger and a strategy")
        trigger, threshold = self.trigger(table["trigger"], f"{where}.trigger")
        strategy = self.strategy(table["strategy"], f"{where}.strategy")
        return Policy(app_name, trigger, strategy, threshold)

    def trigger(self, spec: Any, where: str) -> tuple[Any, int | None]:
        kind, options = _kind(spec, where, _TRIGGERS)
        if kind == "any_of":
            children = options.pop("triggers", None)
            _no_more(options, where)
            if not isinstance(children, list) or not children:
                raise ValueError(f"{where}: any_of needs a non-empty 'triggers' list")
            built = [self.trigger(child, f"{where}.triggers[{i}]") for i, child in enumerate(children)]
            thresholds = [t for _, t in built if t is not None]
            return AnyOf(*(t for t, _ in built)), (min(thresholds) if thresholds else None)
        if kind == "context_window":
            model = options.pop("model", None)
            if "context_window" not in options:
                options["context_window"] = _call(context_window_for, {"model": model or self._model}, where)
            elif model is not None:
                raise ValueError(f"{where}: give either model or context_window, not both")
        trigger = _call(_TRIGGERS[kind], options, where)
        if isinstance(trigger, TokenCountTrigger):
            return trigger, trigger.threshold
        if isinstance(trigger, ContextWindowTrigger):
            return trigger, trigger.boundary
        return trigger, None

    def strategy(self, spec: Any, where: str) -> Any:
        kind, options = _kind(spec, where, _STRATEGIES)
        if kind in _SUMMARIZING:
            options["summarizer"] = self.summarizer()
        return _call(_STRATEGIES[kind], options, where)


_TRIGGERS: Mapping[str, Callable[..., Any]] = {
    "turns": TurnCountTrigger,
    "tokens": TokenCountTrigger,
    "context_window": ContextWindowTrigger,
    "events": EventCountTrigger,
    "any_of": AnyOf,
}
_STRATEGIES: Mapping[str, Callable[..., Any]] = {
    "recursive": RecursiveSummarizationStrategy,
    "sliding": SlidingWindowStrategy,
    "turns": TurnWindowStrategy,
    "tokens": TokenCountStrategy,
    "adk": AdkSlidingWindowStrategy,
    "adk_tokens": AdkTokenThresholdStrategy,
}
_SUMMARIZING = frozenset({"recursive", "adk", "adk_tokens"})


def _kind(spec: Any, where: str, known: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    if not isinstance(spec, Mapping) or "type" not in spec:
        raise ValueError(f"{where} must be a table with a 'type' ({', '.join(known)})")
    options = dict(spec)
    kind = options.pop("type")
    if not isinstance(kind, str) or kind not in known:
        raise ValueError(f"{where}: unknown type {kind!r}; known: {', '.join(known)}")
    if "estimator" in options or "summarizer" in options:
        raise ValueError(f"{where}: estimator and summarizer come from the deployment, not the policy")
    return kind, options


def _no_more(options: Mapping[str, Any], where: str) -> None:
    if options:
        raise ValueError(f"{where}: unknown options {sorted(options)}")


def _call(factory: Callable[..., Any], options: dict[str, Any], where: str) -> Any:
    try:
        return factory(**options)
    except TypeError as error:
        raise ValueError(f"{where}: {error}") from None
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
