"""google-adk's `EventsCompactionConfig` as the workers' compaction policy for an app.

ADK compacts inside its `Runner` (after an invocation, or before a model call): the summary call
holds up the conversation, and a compaction that races an append was google-adk's stale-session
error (issue #5194). On the ledger the workers compact in the background with the same two
algorithms (`AdkSlidingWindowStrategy`, `AdkTokenThresholdStrategy`), so an ADK application moves
its config into the deployment's policy (`SESSIONLEDGER_POLICY`) and leaves
`App.events_compaction_config` unset.
"""

from __future__ import annotations

from typing import Any

from google.adk.apps.app import EventsCompactionConfig


def compaction_policy(config: EventsCompactionConfig) -> dict[str, Any]:
    """The policy table (`{"trigger": ..., "strategy": ...}`) doing what `config` asks.

    The token pair (`token_threshold`, `event_retention_size`) wins when both pairs are set, as
    ADK runs it first and skips the sliding window when it summarized. A config-level summarizer
    is not carried over: the workers summarize with the deployment's (`summarizer_from_settings`).
    """
    if config.token_threshold is not None and config.event_retention_size is not None:
        return {
            "trigger": {"type": "tokens", "threshold": config.token_threshold},
            "strategy": {
                "type": "adk_tokens",
                "token_threshold": config.token_threshold,
                "event_retention_size": config.event_retention_size,
            },
        }
    if config.compaction_interval is not None and config.overlap_size is not None:
        # every new invocation adds at least one event: fewer events cannot make enough invocations
        return {
            "trigger": {"type": "events", "interval": config.compaction_interval},
            "strategy": {
                "type": "adk",
                "compaction_interval": config.compaction_interval,
                "overlap_size": config.overlap_size,
            },
        }
    raise ValueError("the config sets neither compaction_interval/overlap_size nor the token pair")


def policy_toml(app_name: str, config: EventsCompactionConfig) -> str:
    """`compaction_policy` as the TOML table `SESSIONLEDGER_POLICY` (or the policy file) takes."""
    policy = compaction_policy(config)
    return (
        f"[apps.{_toml_key(app_name)}]\n"
        f"trigger = {_inline(policy['trigger'])}\n"
        f"strategy = {_inline(policy['strategy'])}\n"
    )


def _inline(table: dict[str, Any]) -> str:
    items = ", ".join(f"{key} = {_value(value)}" for key, value in table.items())
    return "{ " + items + " }"


def _value(value: Any) -> str:
    return _toml_key(value) if isinstance(value, str) else str(value)


def _toml_key(text: str) -> str:
    """A TOML basic string (quoted, escaped), valid as a key and as a value."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
