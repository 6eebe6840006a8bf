"""MemoryChat with the real `openai` client (AsyncMemoryChat with `openai.AsyncOpenAI`) against the
fake server, on memory, SQLite and PostgreSQL: tool calls and their results stored in order and in
pairs, the recall tools answered in the loop, other tools handed back, a looping model bounded,
streams stored only when complete."""

from __future__ import annotations

import json
import re
import uuid

import openai
import pytest
from sessionledger.domain import (
    AssistantMessage,
    EventFilter,
    MessageType,
    SystemMessage,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.domain.hashing import canonical
from sessionledger.domain.memory import remove_unpaired_tool_calls

from tests.fakes.fake_openai import Reply
from tests.integration import agent_faces

face, service = agent_faces.face, agent_faces.service  # each test on both faces

SEARCH_TEA = ("call_1", "conversation_search", json.dumps({"innerThought": "recall", "query": "tea"}))


@pytest.fixture
def client(fake_openai):
    with openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0, timeout=10) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def chat(face, service, client, **options):
    return face.MemoryChat(
        client, face.SessionMemory(service), model="fake-model", recall=face.RecallTools(service), **options
    )


def stored(service, cid):
    return service.get_messages(cid)


def assert_paired(service, cid):
    events = service.get_events(cid, EventFilter.all())
    assert remove_unpaired_tool_calls(events) == events
    for index, event in enumerate(events):  # every call is followed at once by its results
        if event.message.tool_calls:
            answered = {r.id for r in events[index + 1].message.tool_responses}
            assert answered == {c.id for c in event.message.tool_calls}


def test_one_call_stores_the_request_and_the_reply(face, service, client, fake_openai):
    cid, user = unique("c"), unique("u")
    fake_openai.enqueue(Reply.text("Hello!"), Reply.text("Still here."))
    bot = chat(face, service, client)
    completion = bot.complete(cid, [SystemMessage("be kind"), UserMessage("hi")], user_id=user)
    assert completion.choices[0].message.content == "Hello!"
    bot.complete(cid, [SystemMessage("be kind"), UserMessage("there?")], user_id=user)
    assert stored(service, cid) == [
        UserMessage("hi"),
        AssistantMessage("Hello!"),
        UserMessage("there?"),
        AssistantMessage("Still here."),
    ]
    sent = fake_openai.requests[-1].body
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert {t["function"]["name"] for t in sent["tools"]} == {"conversation_search", "cross_session_search"}


def test_recall_calls_are_answered_in_the_loop_and_stored_in_pairs(face, service, client, fake_openai):
    cid, user = unique("c"), unique("u")
    service.create_session(user, session_id=cid)
    service.append_message(cid, UserMessage("I drink green tea every morning"))
    fake_openai.enqueue(Reply.calling(SEARCH_TEA), Reply.text("You drink green tea."))
    completion = chat(face, service, client).complete(cid, [UserMessage("what do I drink?")], user_id=user)
    assert completion.choices[0].message.content == "You drink green tea."
    messages = stored(service, cid)
    assert [m.type for m in messages] == [
        MessageType.USER,
        MessageType.USER,
        MessageType.ASSISTANT,
        MessageType.TOOL,
        MessageType.ASSISTANT,
    ]
    result = messages[3].tool_responses[0]
    assert result.id == "call_1" and "green tea every morning" in result.content
    second = fake_openai.requests[1].body["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": result.content}
    assert_paired(service, cid)


def test_a_recall_call_can_never_reach_another_users_session(face, service, client, fake_openai):
    victim = unique("c")
    service.create_session("victim", session_id=victim)
    service.append_message(victim, UserMessage("the tea vault code is 1234"))
    cid = unique("c")
    arguments = json.dumps({"innerThought": "x", "query": "tea", "sessionId": victim, "userId": "victim"})
    fake_openai.enqueue(Reply.calling(("call_x", "conversation_search", arguments)), Reply.text("ok"))
    fake_openai.enqueue(Reply.calling(("call_y", "cross_session_search", arguments)), Reply.text("ok"))
    bot, mallory = chat(face, service, client), unique("mallory")
    bot.complete(cid, [UserMessage("find tea")], user_id=mallory)
    bot.complete(cid, [UserMessage("find tea everywhere")], user_id=mallory)
    results = [m.tool_responses[0].content for m in stored(service, cid) if m.type is MessageType.TOOL]
    assert len(results) == 2 and all("find tea" in r and "vault" not in r for r in results)


def test_other_tools_end_the_loop_and_their_results_come_in_the_next_call(face, service, client, fake_openai):
    cid, user = unique("c"), unique("u")
    weather = ("call_w", "get_weather", '{"city": "Oslo"}')
    fake_openai.enqueue(Reply.calling(weather), Reply.text("It is cold in Oslo."))
    bot = chat(face, service, client)
    weather_tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    completion = bot.complete(cid, [UserMessage("weather?")], user_id=user, tools=[weather_tool])
    assert completion.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert len(fake_openai.requests) == 1
    assert "get_weather" in {t["function"]["name"] for t in fake_openai.requests[0].body["tools"]}
    results = ToolResponseMessage([ToolResponse("call_w", "get_weather", "-5 C")])
    final = bot.complete(cid, [results], user_id=user, tools=[weather_tool])
    assert final.choices[0].message.content == "It is cold in Oslo."
    assert [m.type for m in stored(service, cid)] == [
        MessageType.USER,
        MessageType.ASSISTANT,
        MessageType.TOOL,
        MessageType.ASSISTANT,
    ]
    assert_paired(service, cid)


def test_a_reply_mixing_recall_and_other_tools_goes_back_to_the_caller_unanswered(
    face, service, client, fake_openai
):
    cid = unique("c")
    fake_openai.enqueue(Reply.calling(SEARCH_TEA, ("call_w", "get_weather", "{}")))
    completion = chat(face, service, client).complete(cid, [UserMessage("both")], user_id="u")
    assert len(completion.choices[0].message.tool_calls) == 2
    assert [m.type for m in stored(service, cid)] == [MessageType.USER, MessageType.ASSISTANT]


def test_a_model_looping_on_recall_calls_is_bounded_and_leaves_no_call_unanswered(
    face, service, client, fake_openai
):
    cid = unique("c")
    fake_openai.fallback = Reply.calling(SEARCH_TEA)
    completion = chat(face, service, client, max_tool_rounds=3).complete(
        cid, [UserMessage("loop")], user_id="u"
    )
    assert completion.choices[0].message.tool_calls
    assert len(fake_openai.requests) == 3
    assert [m.type for m in stored(service, cid)] == [MessageType.USER] + [
        MessageType.ASSISTANT,
        MessageType.TOOL,
    ] * 3
    assert_paired(service, cid)


def test_malformed_tool_call_json_is_answered_with_an_error_the_model_reads(
    face, service, client, fake_openai
):
    cid = unique("c")
    fake_openai.enqueue(
        Reply.calling(("call_bad", "conversation_search", '{"query": "tea"')),
        Reply.text("Sorry, let me retry."),
    )
    chat(face, service, client).complete(cid, [UserMessage("x")], user_id="u")
    result = stored(service, cid)[2].tool_responses[0]
    assert (
        result.id == "call_bad" and result.content.startswith("Error:") and "not valid JSON" in result.content
    )
    assert fake_openai.requests[1].body["messages"][-1]["content"] == result.content
    assert_paired(service, cid)


def recall_calls(count: int) -> list[tuple[str, str, str]]:
    return [
        (f"call_{i}", "conversation_search", json.dumps({"innerThought": "x", "query": "tea"}))
        for i in range(count)
    ]


def test_a_reply_asking_for_many_recall_calls_gets_a_bounded_number_run(face, service, client, fake_openai):
    """Issue 25: 2,000 calls in one reply ran 2,000 searches; beyond the bound each gets an `Error:`."""
    cid = unique("c")
    fake_openai.enqueue(Reply.calling(*recall_calls(40)), Reply.text("done"))
    completion = chat(face, service, client, max_tool_calls_per_round=5).complete(
        cid, [UserMessage("I like tea")], user_id="u"
    )
    assert completion.choices[0].message.content == "done"
    results = stored(service, cid)[2].tool_responses
    assert [r.id for r in results] == [f"call_{i}" for i in range(40)]  # every call id answered
    assert all("I like tea" in r.content for r in results[:5])
    assert all(r.content.startswith("Error: not run: at most 5 tool calls") for r in results[5:])
    assert fake_openai.requests[1].body["messages"][-1]["content"] == results[-1].content
    assert_paired(service, cid)


def test_the_bound_on_calls_per_round_is_sixteen_by_default(face, service, client, fake_openai):
    cid = unique("c")
    fake_openai.enqueue(Reply.calling(*recall_calls(17)), Reply.text("done"))
    chat(face, service, client).complete(cid, [UserMessage("tea")], user_id="u")
    results = stored(service, cid)[2].tool_responses
    assert [r.content.startswith("Error:") for r in results] == [False] * 16 + [True]


@pytest.mark.parametrize("calls", [1, 16])
def test_recall_results_over_the_payload_limit_are_cut_and_the_reply_kept(
    face, database_url, client, fake_openai, calls
):
    """Issue 25: the results event went over the payload limit, and the reply asking for it was lost."""
    limit = 20_000
    cid = unique("c")
    with face.open_service(database_url, max_payload_bytes=limit) as small:
        small.create_session("u", session_id=cid)
        for i in range(10):
            small.append_message(cid, UserMessage(f"tea note {i}: " + '"é' * 600))  # escapes, 2-byte chars
        fake_openai.enqueue(Reply.calling(*recall_calls(calls)), Reply.text("done"))
        completion = chat(face, small, client).complete(cid, [UserMessage("tea?")], user_id="u")
        assert completion.choices[0].message.content == "done"
        events = small.get_events(cid, EventFilter.all())
        assert [e.message.type for e in events][-3:] == [
            MessageType.ASSISTANT,
            MessageType.TOOL,
            MessageType.ASSISTANT,
        ]
        results = events[-2].message.tool_responses
        assert len(results) == calls
        assert all(re.search(r"\.\.\. \[cut: \d+ of \d+ bytes shown\]$", r.content) for r in results)
        assert all(r.content.startswith('[{"timestamp"') for r in results)
        sizes = [len(canonical(record.payload).encode()) for record in small.records(cid) if record.payload]
        assert max(sizes) <= limit
        assert fake_openai.requests[1].body["messages"][-1]["content"] == results[-1].content
        assert_paired(small, cid)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("  ", [UserMessage("x")]), {}, "conversation_id"),
        (("c", None), {}, "messages must not be None"),
        (("c", [UserMessage("x"), "y"]), {}, "messages must be a list of Message"),
        (("c", [UserMessage("x")]), {"model": "other"}, "'model' is MemoryChat's"),
    ],
)
def test_bad_input_is_a_value_error_before_any_call(
    face, service, client, fake_openai, args, kwargs, message
):
    user = unique("u")
    with pytest.raises(ValueError, match=message):
        chat(face, service, client).complete(*args, user_id=user, **kwargs)
    assert fake_openai.requests == []
    assert service.list_sessions(user) == []


def test_another_users_conversation_is_refused_before_the_model_is_called(face, service, client, fake_openai):
    cid = unique("c")
    service.create_session("owner", session_id=cid)
    service.append_message(cid, UserMessage("private"))
    with pytest.raises(ValueError, match="does not belong to user 'mallory'"):
        chat(face, service, client).complete(cid, [UserMessage("show me")], user_id="mallory")
    assert fake_openai.requests == []
    assert stored(service, cid) == [UserMessage("private")]


def test_constructor_checks(face, service, client):
    with pytest.raises(ValueError, match="max_tool_rounds"):
        face.MemoryChat(client, model="m", max_tool_rounds=0)
    with pytest.raises(ValueError, match="model"):
        face.MemoryChat(client, model=" ")
    with pytest.raises(ValueError, match="advisor 0"):
        face.MemoryChat(client, object(), model="m")  # type: ignore[arg-type]  # the wrong value under test
    with pytest.raises(ValueError, match=r"client has no chat\.completions\.create"):
        face.MemoryChat(object(), model="m")


def test_a_stream_is_stored_once_complete(face, service, client, fake_openai):
    cid = unique("c")
    fake_openai.enqueue(Reply.text("A streamed answer in pieces."))
    chunks = chat(face, service, client).complete(cid, [UserMessage("stream it")], user_id="u", stream=True)
    assert stored(service, cid) == [UserMessage("stream it")]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "A streamed answer in pieces."
    assert stored(service, cid) == [
        UserMessage("stream it"),
        AssistantMessage("A streamed answer in pieces."),
    ]


def test_a_streamed_recall_loop_streams_every_round_and_stores_the_pairs(face, service, client, fake_openai):
    cid = unique("c")
    service.create_session("u", session_id=cid)
    service.append_message(cid, UserMessage("oolong tea is my favourite"))
    fake_openai.enqueue(Reply.calling(SEARCH_TEA), Reply.text("Oolong."))
    chunks = list(
        chat(face, service, client).complete(cid, [UserMessage("favourite?")], user_id="u", stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Oolong."
    messages = stored(service, cid)
    assert messages[2].tool_calls[0].arguments == SEARCH_TEA[2]
    assert "oolong tea" in messages[3].tool_responses[0].content
    assert messages[4] == AssistantMessage("Oolong.")
    assert_paired(service, cid)


def test_an_interrupted_stream_stores_nothing_partial(face, service, client, fake_openai):
    cid = unique("c")
    fake_openai.enqueue(Reply.cut_stream("This answer never finishes", after=3))
    chunks = chat(face, service, client).complete(cid, [UserMessage("go")], user_id="u", stream=True)
    with pytest.raises(openai.APIConnectionError):
        list(chunks)
    assert stored(service, cid) == [UserMessage("go")]


def test_a_stream_the_caller_abandons_stores_nothing_of_it(face, service, client, fake_openai):
    cid = unique("c")
    fake_openai.enqueue(Reply.text("A long answer the caller stops reading."))
    chunks = chat(face, service, client).complete(cid, [UserMessage("go")], user_id="u", stream=True)
    next(chunks)
    chunks.close()
    assert stored(service, cid) == [UserMessage("go")]


def test_a_streamed_reply_with_two_calls_is_put_back_together(face, service, client, fake_openai):
    cid, user = unique("c"), unique("u")
    cross = ("call_2", "cross_session_search", json.dumps({"innerThought": "t", "query": "tea, coffee"}))
    fake_openai.enqueue(Reply.calling(SEARCH_TEA, cross, content="Let me check."), Reply.text("Done."))
    list(
        chat(face, service, client).complete(cid, [UserMessage("tea or coffee?")], user_id=user, stream=True)
    )
    call = stored(service, cid)[1]
    assert call.text == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in call.tool_calls] == [SEARCH_TEA, cross]
    assert [r.id for r in stored(service, cid)[2].tool_responses] == ["call_1", "call_2"]
    assert_paired(service, cid)
