"""A real google-adk `Runner` over LedgerSessionService, with a scripted model: a multi-turn
conversation with a tool call, a rewind (the ledger's), and a compaction by the ledger that the
next model call sees as ADK's own compacted history."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field
from sessionledger.domain.compaction.strategies import RecursiveSummarizationStrategy
from sessionledger.domain.compaction.triggers import EventCountTrigger
from sessionledger.domain.records import Kind
from sessionledger.infrastructure.adk import LedgerSessionService


class ScriptedLlm(BaseLlm):
    """Answers each call with the next scripted content and keeps what each call was shown."""

    model: str = "scripted"
    replies: list[types.Content] = Field(default_factory=list)
    seen: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(list(llm_request.contents))
        yield LlmResponse(content=self.replies.pop(0))


def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def said(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def texts(contents: list[types.Content]) -> list[str]:
    return [
        part.text
        if part.text
        else f"call {part.function_call.name}"
        if part.function_call
        else f"response {part.function_response.response}"
        for content in contents
        for part in content.parts or ()
    ]


class Summary:
    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "The user asked for sums."


def test_runner_conversation_rewind_and_compaction_over_the_ledger(database_url):
    async def main() -> None:
        app = f"app-{uuid.uuid4().hex[:8]}"
        model = ScriptedLlm(
            replies=[
                types.Content(
                    role="model",
                    parts=[types.Part(function_call=types.FunctionCall(name="add", args={"a": 2, "b": 3}))],
                ),
                said("It is 5."),
                said("Doubled: 10."),
                said("Tripled: 15."),
                said("Still 5."),
            ]
        )
        agent = LlmAgent(
            name="calc", model=model, instruction="Do sums.", tools=[add], output_key="last_reply"
        )
        async with LedgerSessionService(database_url) as service:
            runner = Runner(app_name=app, agent=agent, session_service=service)
            session = await service.create_session(app_name=app, user_id="u", state={"plan": "free"})

            async def turn(text: str) -> list[str]:
                events = [
                    e
                    async for e in runner.run_async(
                        user_id="u", session_id=session.id, new_message=user(text)
                    )
                ]
                return texts([e.content for e in events if e.content])

            assert await turn("What is 2+3?") == ["call add", "response {'result': 5}", "It is 5."]
            assert await turn("Double it.") == ["Doubled: 10."]
            assert texts(model.seen[-1]) == [
                "What is 2+3?",
                "call add",
                "response {'result': 5}",
                "It is 5.",
                "Double it.",
            ]
            stored = await service.get_session(app_name=app, user_id="u", session_id=session.id)
            assert stored.state == {"plan": "free", "last_reply": "Doubled: 10."}
            assert len(stored.events) == 6
            second = stored.events[4].invocation_id

            await runner.rewind_async(user_id="u", session_id=session.id, rewind_before_invocation_id=second)
            rewound = await service.get_session(app_name=app, user_id="u", session_id=session.id)
            assert [e.invocation_id for e in rewound.events][:4] == [stored.events[0].invocation_id] * 4
            assert len(rewound.events) == 5  # the first turn and the rewind marker
            assert rewound.state == {"plan": "free", "last_reply": "It is 5."}
            assert await turn("Triple it.") == ["Tripled: 15."]
            assert "Double it." not in texts(model.seen[-1])

            key = service.ledger_id(app, "u", session.id)
            strategy = RecursiveSummarizationStrategy(Summary(), max_events_to_keep=2, overlap_size=1)
            assert (await service.service.compact(key, EventCountTrigger(1), strategy)).archived
            assert await turn("And now?") == ["Still 5."]
            shown = texts(model.seen[-1])
            assert shown[0] == "The user asked for sums."  # ADK rendered the ledger's summary
            assert "What is 2+3?" not in shown and shown[-1] == "And now?"

            kinds = [r.kind for r in await service.service.records(key)]
            assert kinds.count(Kind.EVENT) == 6 + 1 + 2 + 2 + 2  # turns, the rewind marker, summary pair
            assert kinds.count(Kind.REWIND) == 1 and kinds.count(Kind.COMPACTION) == 1

    asyncio.run(main())
