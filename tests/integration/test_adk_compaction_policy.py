"""google-adk's EventsCompactionConfig becomes the workers' policy for the app, and that policy
compacts an ADK session into what ADK reads as its own compaction event."""

from __future__ import annotations

import asyncio

import pytest
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event
from google.genai import types
from sessionledger.domain.compaction import (
    AdkSlidingWindowStrategy,
    AdkTokenThresholdStrategy,
    EventCountTrigger,
    TokenCountTrigger,
)
from sessionledger.infrastructure.adk import LedgerSessionService
from sessionledger.infrastructure.adk.compaction import compaction_policy, policy_toml
from sessionledger.infrastructure.policies import load_policies
from sessionledger.infrastructure.summarizers.extractive import ExtractiveSummarizer


def policy_for(app: str, config: EventsCompactionConfig):
    return load_policies(ExtractiveSummarizer, inline=policy_toml(app, config)).for_app(app)


def test_the_sliding_window_pair_is_the_adk_strategy_behind_an_event_count():
    policy = policy_for('my "app"', EventsCompactionConfig(compaction_interval=3, overlap_size=1))
    assert isinstance(policy.trigger, EventCountTrigger) and policy.trigger.interval == 3
    assert isinstance(policy.strategy, AdkSlidingWindowStrategy)
    assert (policy.strategy.compaction_interval, policy.strategy.overlap_size) == (3, 1)


def test_the_token_pair_wins_as_it_runs_first_in_adk():
    config = EventsCompactionConfig(
        compaction_interval=3, overlap_size=1, token_threshold=500, event_retention_size=2
    )
    policy = policy_for("app", config)
    assert isinstance(policy.trigger, TokenCountTrigger) and policy.trigger.threshold == 500
    assert isinstance(policy.strategy, AdkTokenThresholdStrategy)
    assert compaction_policy(config)["strategy"] == {
        "type": "adk_tokens",
        "token_threshold": 500,
        "event_retention_size": 2,
    }


def test_a_config_without_a_complete_pair_is_refused():
    config = EventsCompactionConfig.model_construct(compaction_interval=None, token_threshold=None)
    with pytest.raises(ValueError, match="neither"):
        compaction_policy(config)


def test_the_policy_compacts_an_adk_session_into_an_adk_compaction_event(database_url):
    async def main() -> None:
        policy = policy_for("calc", EventsCompactionConfig(compaction_interval=2, overlap_size=0))
        async with LedgerSessionService(database_url) as service:
            session = await service.create_session(app_name="calc", user_id="u")
            for n in range(3):
                for author, text in (("user", f"Question {n} about sums?"), ("calc", f"Answer {n} is {n}.")):
                    role = "user" if author == "user" else "model"
                    content = types.Content(role=role, parts=[types.Part(text=text)])
                    event = Event(
                        invocation_id=f"inv{n}", author=author, content=content, timestamp=100.0 + n
                    )
                    await service.append_event(session, event)
            key = service.ledger_id("calc", "u", session.id)
            assert (await service.service.compact(key, policy.trigger, policy.strategy)).archived
            got = await service.get_session(app_name="calc", user_id="u", session_id=session.id)
            summaries = [e for e in got.events if e.actions.compaction is not None]
            assert len(summaries) == 1 and summaries[0].actions.compaction.compacted_content.parts[0].text
            assert summaries[0] is got.events[0]

    asyncio.run(main())
