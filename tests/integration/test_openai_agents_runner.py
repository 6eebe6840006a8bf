"""A real `agents.Runner` over LedgerSession: a multi-turn conversation with a tool call and reasoning
items, scripted by a Model subclass, gives the model the same history and stores the same items as
the SDK's own SQLiteSession; and over the fake OpenAI server through the SDK's chat-completions model."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    ModelResponse,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
)
from agents.items import TResponseInputItem
from agents.memory import Session
from agents.models.interface import Model
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from sessionledger.infrastructure.openai_agents import LedgerSession

from tests.fakes.fake_openai import FakeOpenAI, Reply

NO_TRACING = RunConfig(tracing_disabled=True)


def text(reply: str, number: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{number}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=reply, annotations=[])],
    )


class ScriptedModel(Model):
    """Answers each model call with the next scripted output, and keeps every input it was given."""

    def __init__(self, outputs: list[list[Any]]) -> None:
        self.outputs = list(outputs)
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append(list(input) if isinstance(input, list) else [{"role": "user", "content": input}])
        return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run without streaming")


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"22 C and sunny in {city}"


def script() -> list[list[Any]]:
    return [
        [
            ResponseReasoningItem(
                id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text="Look it up.")]
            ),
            ResponseFunctionToolCall(
                id="fc_1",
                type="function_call",
                call_id="call_1",
                name="get_weather",
                arguments='{"city": "Paris"}',
            ),
        ],
        [text("It is 22 C and sunny in Paris.", 1)],
        [text("You asked about Paris.", 2)],
    ]


async def conversation(session: Session) -> tuple[ScriptedModel, list[str]]:
    model = ScriptedModel(script())
    agent = Agent(name="weather", instructions="Be brief.", model=model, tools=[get_weather])
    first = await Runner.run(agent, "Weather in Paris?", session=session, run_config=NO_TRACING)
    second = await Runner.run(agent, "Which city did I ask about?", session=session, run_config=NO_TRACING)
    return model, [first.final_output, second.final_output]


def test_a_runner_conversation_over_the_ledger_matches_the_sdk_session(database_url: str) -> None:
    async def scenario() -> None:
        session_id = f"runner-{uuid.uuid4().hex[:8]}"
        ours = LedgerSession(session_id, database_url=database_url)
        peer = SQLiteSession(session_id)
        try:
            our_model, our_replies = await conversation(ours)
            peer_model, peer_replies = await conversation(peer)
            assert our_replies == peer_replies == ["It is 22 C and sunny in Paris.", "You asked about Paris."]
            assert our_model.inputs == peer_model.inputs  # the model saw the same history each call
            items = await ours.get_items()
            assert items == await peer.get_items()
            kinds = [item.get("type", item.get("role")) for item in items]
            assert kinds == [
                "user",
                "reasoning",
                "function_call",
                "function_call_output",
                "message",
                "user",
                "message",
            ]
            last_input = our_model.inputs[-1]
            assert [i.get("type", i.get("role")) for i in last_input][:5] == kinds[:5]
            records = await ours.service.records(session_id)
            assert len(records) == 1 + len(items)  # created, then one event per item
        finally:
            await ours.close()
            peer.close()

    asyncio.run(scenario())


def test_a_runner_over_the_fake_openai_server_keeps_the_conversation(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Reply.text("Hello Ada."), Reply.text("Your name is Ada."))

    async def scenario() -> None:
        client = AsyncOpenAI(base_url=fake_openai.base_url, api_key="test-key", max_retries=0)
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        agent = Agent(name="assistant", instructions="Be brief.", model=model)
        session = LedgerSession("fake-server-chat", database_url="memory://")
        try:
            first = await Runner.run(agent, "Hi, I am Ada.", session=session, run_config=NO_TRACING)
            second = await Runner.run(agent, "What is my name?", session=session, run_config=NO_TRACING)
            assert [first.final_output, second.final_output] == ["Hello Ada.", "Your name is Ada."]
            sent = fake_openai.requests[-1].body["messages"]
            assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
            assert sent[1]["content"] == "Hi, I am Ada." and sent[2]["content"] == "Hello Ada."
            assert len(await session.get_items()) == 4
        finally:
            await session.close()
            await client.close()

    asyncio.run(scenario())
