"""Compaction policies from TOML: every trigger and strategy type, fallbacks, and clear errors."""

from __future__ import annotations

import pytest
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
from sessionledger.infrastructure.policies import load_policies, policies_from_settings
from sessionledger.infrastructure.settings import Settings


class CountingSummarizer:
    built = 0

    def __init__(self) -> None:
        CountingSummarizer.built += 1

    def summarize(self, system_prompt: str, user_prompt: str) -> str | None:
        return "summary"


POLICIES = """
[apps.default]
trigger = { type = "turns", max_turns = 20 }
strategy = { type = "recursive", max_events_to_keep = 10, overlap_size = 2 }

[apps.support]
trigger = { type = "any_of", triggers = [
    { type = "context_window", model = "gpt-4", percentage = 50 },
    { type = "tokens", threshold = 3000 },
    { type = "events", interval = 7 } ] }
strategy = { type = "sliding", max_events = 30 }

[apps.quiet]
enabled = false
"""


def test_each_app_gets_its_trigger_and_strategy_and_unknown_apps_the_default(tmp_path):
    path = tmp_path / "policies.toml"
    path.write_text(POLICIES)
    book = load_policies(CountingSummarizer, policy_file=path)
    default = book.for_app("default")
    assert isinstance(default.trigger, TurnCountTrigger) and default.trigger.max_turns == 20
    assert isinstance(default.strategy, RecursiveSummarizationStrategy)
    assert (default.strategy.max_events_to_keep, default.strategy.overlap_size) == (10, 2)
    assert default.token_threshold is None
    assert book.for_app("some-other-app") is default
    support = book.for_app("support")
    assert isinstance(support.trigger, AnyOf)
    window, tokens, events = support.trigger.triggers
    assert isinstance(window, ContextWindowTrigger) and window.boundary == 8192 * 50 // 100
    assert isinstance(tokens, TokenCountTrigger) and isinstance(events, EventCountTrigger)
    assert support.token_threshold == 3000  # the lowest token boundary of the any_of
    assert isinstance(support.strategy, SlidingWindowStrategy) and support.strategy.max_events == 30
    assert book.for_app("quiet") is None


def test_the_summarizer_is_built_once_and_only_when_a_strategy_needs_one():
    CountingSummarizer.built = 0
    load_policies(
        CountingSummarizer,
        inline='apps.a.trigger={type="turns",max_turns=3}\napps.a.strategy={type="turns",max_turns=2}',
    )
    assert CountingSummarizer.built == 0
    load_policies(
        CountingSummarizer,
        inline=POLICIES + '[apps.b]\ntrigger={type="turns",max_turns=3}\n'
        'strategy={type="adk",compaction_interval=3,overlap_size=1}',
    )
    assert CountingSummarizer.built == 1


@pytest.mark.parametrize(
    ("strategy", "kind"),
    [
        ('{type="turns", max_turns=4}', TurnWindowStrategy),
        ('{type="tokens", max_tokens=900}', TokenCountStrategy),
        ('{type="adk", compaction_interval=3, overlap_size=1}', AdkSlidingWindowStrategy),
        ('{type="adk_tokens", token_threshold=500, event_retention_size=4}', AdkTokenThresholdStrategy),
    ],
)
def test_every_strategy_type(strategy, kind):
    book = load_policies(
        CountingSummarizer, inline=f'apps.x.trigger={{type="turns",max_turns=3}}\napps.x.strategy={strategy}'
    )
    assert isinstance(book.for_app("x").strategy, kind)


def test_context_window_defaults_to_the_deployment_model_and_inline_policies_override_the_file(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(POLICIES)
    inline = 'apps.default.trigger={type="context_window"}\napps.default.strategy={type="sliding"}'
    book = load_policies(CountingSummarizer, policy_file=path, inline=inline, model="gpt-4o")
    trigger = book.for_app("default").trigger
    assert trigger.context_window == 128_000 and trigger.percentage == 60
    assert book.for_app("default").token_threshold == 76_800
    assert isinstance(book.for_app("support").strategy, SlidingWindowStrategy)  # still from the file


def test_without_configuration_every_app_gets_the_built_in_policy(monkeypatch):
    monkeypatch.delenv("SESSIONLEDGER_POLICY", raising=False)
    monkeypatch.delenv("SESSIONLEDGER_POLICY_FILE", raising=False)
    book = policies_from_settings(CountingSummarizer, Settings())
    policy = book.for_app("anything")
    assert isinstance(policy.trigger, AnyOf) and isinstance(policy.strategy, RecursiveSummarizationStrategy)


def test_the_environment_variable_holds_a_policy(monkeypatch):
    monkeypatch.setenv(
        "SESSIONLEDGER_POLICY",
        'apps.default.trigger={type="turns",max_turns=2}\n'
        'apps.default.strategy={type="sliding",max_events=4}',
    )
    monkeypatch.delenv("SESSIONLEDGER_POLICY_FILE", raising=False)
    book = policies_from_settings(CountingSummarizer, Settings())
    assert book.for_app("a").trigger.max_turns == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('apps.a.trigger={type="turns",max_turns=3}', "needs both a trigger and a strategy"),
        ('apps.a.trigger={type="nope"}\napps.a.strategy={type="sliding"}', "unknown type 'nope'"),
        ('apps.a.trigger={type="turns",max_turn=3}\napps.a.strategy={type="sliding"}', "apps.a.trigger"),
        ('apps.a.trigger={type="turns",max_turns=0}\napps.a.strategy={type="sliding"}', "max_turns"),
        (
            'apps.a.trigger={type="turns",max_turns=3}\napps.a.strategy={type="sliding",max_events=-1}',
            "strategy",
        ),
        ('apps.a.trigger={type="any_of",triggers=[]}\napps.a.strategy={type="sliding"}', "non-empty"),
        (
            'apps.a.trigger={type="context_window",model="nope-1"}\napps.a.strategy={type="sliding"}',
            "unknown model",
        ),
        (
            'apps.a.trigger={type="turns",max_turns=3,estimator="len"}\napps.a.strategy={type="sliding"}',
            "estimator",
        ),
        (
            'apps.a.colour="red"\napps.a.trigger={type="turns",max_turns=3}\napps.a.strategy={type="sliding"}',
            "unknown keys",
        ),
        ("policies.a = 1", "unknown top-level keys"),
        ('apps.a.trigger={type=["turns"]}\napps.a.strategy={type="sliding"}', "unknown type \\['turns'\\]"),
        ('apps.a.trigger={type="context_window",model=5}\napps.a.strategy={type="sliding"}', "model must be"),
        (
            'apps.a.trigger={type="turns",max_turns=3}\napps.a.strategy={type="recursive",system_prompt=5}',
            "system_prompt must be a string",
        ),
        (
            'apps.a.trigger={type="turns",max_turns=3.5}\napps.a.strategy={type="sliding"}',
            "max_turns must be an integer",
        ),
        (
            'apps.a.trigger={type="turns",max_turns=3}\napps.a.strategy={type="sliding",max_events=true}',
            "max_events must be an integer",
        ),
        (
            'apps.a.trigger={type="tokens",threshold=nan}\napps.a.strategy={type="sliding"}',
            "threshold must be an integer",
        ),
        (
            'apps.a.trigger={type="context_window",context_window=inf}\napps.a.strategy={type="sliding"}',
            "context_window must be an integer",
        ),
        (
            'apps.a.trigger={type="context_window",context_window=1000,percentage=60.5}\napps.a.strategy={type="sliding"}',
            "percentage must be an integer",
        ),
        (
            'apps.a.enabled="false"\napps.a.trigger={type="turns",max_turns=3}\napps.a.strategy={type="sliding"}',
            "enabled must be true or false",
        ),
    ],
)
def test_configuration_errors_name_the_setting(text, message):
    with pytest.raises(ValueError, match=message):
        load_policies(CountingSummarizer, inline=text)


def test_a_missing_policy_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cannot read policy file"):
        load_policies(CountingSummarizer, policy_file=tmp_path / "missing.toml")


def test_the_settings_name_the_file_the_inline_policies_and_the_model(tmp_path, monkeypatch):
    path = tmp_path / "p.toml"
    path.write_text(POLICIES)
    monkeypatch.setenv("SESSIONLEDGER_POLICY_FILE", str(path))
    monkeypatch.setenv("SESSIONLEDGER_MODEL", "gpt-4")
    inline = 'apps.default.trigger={type="context_window"}\napps.default.strategy={type="sliding"}'
    book = policies_from_settings(CountingSummarizer, Settings(policy=inline))
    assert book.for_app("default").trigger.context_window == context_window_for("gpt-4")
    assert isinstance(book.for_app("support").strategy, SlidingWindowStrategy)  # from the file


@pytest.mark.parametrize("model", ["ft:gpt-4o-mini-2024-07-18:org::abc", "openai/gpt-4o"])
def test_a_fine_tuned_or_provider_named_model_has_its_base_models_context_window(model):
    """As the token counter takes these names: the built-in policy loads for them."""
    book = load_policies(CountingSummarizer, model=model)
    assert book.for_app("any").token_threshold == 128_000 * 60 // 100
