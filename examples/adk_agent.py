"""A google-adk agent whose sessions live in the ledger: `python examples/adk_agent.py [DATABASE_URL]`.

Runs offline, always (`--offline` is accepted like the other examples'): the model is a scripted
stand-in (swap in `model="gemini-2.5-flash"` or a LiteLlm for a real one). The one line that
differs from an ordinary ADK application is the session service: `LedgerSessionService(url)` where
it said `InMemorySessionService()` or `DatabaseSessionService(url)`. Afterwards the ledger shows
what ADK's own services cannot: every record of the conversation, a rewind that hid a turn without
erasing it, and a verified hash chain.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncGenerator

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field
from sessionledger.infrastructure.adk import LedgerSessionService
from sessionledger.infrastructure.audit.verify import verify
from sessionledger.workers.failures import run_or_explain

APP, USER = "weather", "alice"


class ScriptedModel(BaseLlm):
    """Answers with the next scripted reply: a tool call first, then plain text."""

    model: str = "scripted"
    replies: list[types.Part] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=10 * len(llm_request.contents), candidates_token_count=10, total_token_count=0
        )
        yield LlmResponse(
            content=types.Content(role="model", parts=[self.replies.pop(0)]), usage_metadata=usage
        )


def forecast(city: str) -> dict[str, str]:
    """Tomorrow's weather in a city."""
    return {"city": city, "forecast": "sunny, 21 °C"}


async def main(database_url: str) -> None:
    model = ScriptedModel(
        replies=[
            types.Part(function_call=types.FunctionCall(name="forecast", args={"city": "Lisbon"})),
            types.Part(text="Sunny and 21 °C in Lisbon tomorrow."),
            types.Part(text="Pack sunglasses."),
            types.Part(text="A light jacket for the evening."),
        ]
    )
    agent = LlmAgent(name="forecaster", model=model, tools=[forecast], output_key="last_answer")
    async with LedgerSessionService(database_url) as sessions:  # <- the one changed line
        runner = Runner(app_name=APP, agent=agent, session_service=sessions)
        session = await sessions.create_session(app_name=APP, user_id=USER, state={"user:units": "metric"})

        async def ask(text: str) -> None:
            message = types.Content(role="user", parts=[types.Part(text=text)])
            async for event in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
                if event.is_final_response() and event.content and event.content.parts:
                    print(f"{text!r} -> {event.content.parts[0].text!r}")

        await ask("Weather in Lisbon tomorrow?")
        await ask("What should I pack?")
        stored = await sessions.get_session(app_name=APP, user_id=USER, session_id=session.id)
        await runner.rewind_async(
            user_id=USER, session_id=session.id, rewind_before_invocation_id=stored.events[-2].invocation_id
        )
        await ask("What should I wear in the evening?")

        final = await sessions.get_session(app_name=APP, user_id=USER, session_id=session.id)
        key = sessions.ledger_id(APP, USER, session.id)
        records = await sessions.service.records(key)
        checked = await sessions.service.run(lambda service: verify(service, key))
        print(f"state: {final.state}")
        print(f"ADK sees {len(final.events)} events; the ledger keeps {len(records)} records")
        print(f"record kinds: {', '.join(record.kind for record in records)}")
        print(f"hash chain verified: {checked.ok}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database_url", nargs="?", default=argparse.SUPPRESS, help="default: memory://")
    parser.add_argument("--database-url", default="memory://", help="the same, as an option")
    parser.add_argument("--offline", action="store_true", help="accepted; this example is always offline")
    database_url = parser.parse_args().database_url
    run_or_explain(lambda: asyncio.run(main(database_url)))
