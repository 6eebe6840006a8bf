"""`RecallTools.as_langchain_tools`: the two recall tools as LangChain tools, with `definitions()`'s
names, descriptions and schemas, answering every call as `handle` does, for the one user they were
made for; a LangGraph `ToolNode` and `create_react_agent` driven by a fake tool-calling chat model
call them. On memory, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.domain.compaction import SlidingWindowStrategy, TurnCountTrigger
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.agents import RecallTools
from sessionledger.infrastructure.agents.recall import NO_RESULTS


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def session_with(service: SessionService, user: str, texts: list[str]) -> str:
    session_id = service.create_session(user, session_id=unique("s")).id
    for index, text in enumerate(texts):
        service.append_message(session_id, (UserMessage if index % 2 == 0 else AssistantMessage)(text))
    return session_id


def by_name(tools: list[BaseTool]) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in tools}


def test_the_tools_have_the_definitions_names_descriptions_and_schemas(service: SessionService) -> None:
    recall = RecallTools(service)
    tools = recall.as_langchain_tools("s", user_id="ann")
    assert [convert_to_openai_tool(tool) for tool in tools] == recall.definitions()


ARGUMENTS: list[dict[str, Any]] = [
    {"innerThought": "t", "query": "zebra"},
    {"query": "ZEBRA", "page": 1},
    {"query": "zebra", "page": 1.0},
    {"query": "", "page": -2},
    {"query": None},
    {"query": "zebra, lion", "matchMode": "all"},
    {"query": "zebra, lion", "matchMode": "ANY", "since": "2020-01-01T00:00:00Z"},
    {"query": "zebra", "since": "yesterday"},
    {"query": "zebra", "since": "2020-01-01T00:00:00"},
    {"query": 3},
    {"query": "zebra", "page": "two"},
    {"query": "zebra", "page": True},
    {"query": "zebra", "matchMode": 1},
    {"query": ",,,"},
    {"query": ",".join(f"t{i}" for i in range(21))},
    {},
    {"innerThought": "no query"},
]


@pytest.mark.parametrize("arguments", ARGUMENTS, ids=json.dumps)
def test_each_tool_answers_as_handle(service: SessionService, arguments: dict[str, Any]) -> None:
    user = unique("u")
    session_id = session_with(service, user, [f"turn {i}: the zebra and the lion" for i in range(12)])
    session_with(service, user, ["another zebra"])
    service.compact(session_id, TurnCountTrigger(1), SlidingWindowStrategy(max_events=2))  # archived too
    recall = RecallTools(service, page_size=5)
    for name, tool in by_name(recall.as_langchain_tools(session_id, user_id=user)).items():
        expected = recall.handle(name, json.dumps(arguments), session_id=session_id, user_id=user)
        assert tool.invoke(arguments) == expected
        call = {"name": name, "args": arguments, "id": "call-1", "type": "tool_call"}
        assert tool.invoke(call) == ToolMessage(expected, name=name, tool_call_id="call-1")


def test_no_argument_reaches_another_users_sessions(service: SessionService) -> None:
    ann, bob = unique("ann"), unique("bob")
    anns = session_with(service, ann, ["my own note"])
    bobs = session_with(service, bob, ["bob's secret plan"])
    tools = by_name(RecallTools(service).as_langchain_tools(anns, user_id=ann))
    for extra in ({"userId": bob}, {"user_id": bob}, {"sessionId": bobs}, {"session_id": bobs}):
        assert tools["cross_session_search"].invoke({"query": "secret", **extra}) == NO_RESULTS
        assert tools["conversation_search"].invoke({"query": "secret", **extra}) == NO_RESULTS
        found = json.loads(tools["conversation_search"].invoke({"query": "note", **extra}))
        assert [item["text"] for item in found] == ["my own note"]
    bobs_tools = by_name(RecallTools(service).as_langchain_tools(bobs, user_id=ann))
    assert bobs_tools["conversation_search"].invoke({"query": ""}) == NO_RESULTS  # not ann's session


def test_an_empty_user_or_session_is_refused(service: SessionService) -> None:
    with pytest.raises(ValueError, match="user_id"):
        RecallTools(service).as_langchain_tools("s", user_id=" ")
    with pytest.raises(ValueError, match="session_id"):
        RecallTools(service).as_langchain_tools("", user_id="ann")


def test_a_tool_node_calls_them(service: SessionService) -> None:
    user = unique("u")
    session_id = session_with(service, user, ["the zebra is striped", "noted"])
    recall = RecallTools(service)
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(recall.as_langchain_tools(session_id, user_id=user)))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    calls = [
        {"name": "conversation_search", "args": {"innerThought": "t", "query": "zebra"}, "id": "c1"},
        {"name": "cross_session_search", "args": {"innerThought": "t", "query": "noted"}, "id": "c2"},
    ]
    result = graph.compile().invoke({"messages": [AIMessage("", tool_calls=calls)]})
    assert [(m.tool_call_id, m.content) for m in result["messages"][1:]] == [
        (
            call["id"],
            recall.handle(call["name"], json.dumps(call["args"]), session_id=session_id, user_id=user),
        )
        for call in calls
    ]


class ToolCallingFakeModel(GenericFakeChatModel):
    """langchain-core's fake chat model (scripted replies), accepting tools as a real one does."""

    seen: ClassVar[list[list[BaseMessage]]] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFakeModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def test_a_react_agent_recalls_with_them(service: SessionService) -> None:
    user = unique("u")
    session_id = session_with(service, user, ["my cat is called Mistral", "a fine name"])
    service.compact(session_id, TurnCountTrigger(1), SlidingWindowStrategy(max_events=1))
    call = {"name": "conversation_search", "args": {"innerThought": "the cat", "query": "cat"}, "id": "c1"}
    model = ToolCallingFakeModel(
        messages=iter([AIMessage("", tool_calls=[call]), AIMessage("Your cat is Mistral.")])
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langgraph 1 moves it to langchain.agents
        from langgraph.prebuilt import create_react_agent

        agent = create_react_agent(model, RecallTools(service).as_langchain_tools(session_id, user_id=user))
    result = agent.invoke({"messages": [HumanMessage("What is my cat called?")]})
    tool_message = result["messages"][2]
    assert isinstance(tool_message, ToolMessage)
    assert [item["text"] for item in json.loads(str(tool_message.content))] == ["my cat is called Mistral"]
    assert result["messages"][-1].content == "Your cat is Mistral."
    assert model.seen[-1][-1] == tool_message  # the model read the recalled text
