"""The shipped offline model through the real `openai` client: in-process (`offline_client`) and over
HTTP (`sessionledger fake-llm` in its own process), plain, streamed, scripted tool calls, JSON
output for `response_format`, embeddings; and the agents and summarizers that run on it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.agents import MemoryChat, RecallTools, SessionMemory
from sessionledger.infrastructure.offline_model import (
    EMBEDDING_DIMENSIONS,
    OfflineModel,
    Reply,
    embedding,
    offline_async_client,
    offline_client,
    tool_call,
)
from sessionledger.infrastructure.summarizers import StructuredSummarizer
from sessionledger.infrastructure.summarizers.openai_summarizer import OpenAISummarizer

from tests.e2e.queue_deployment import stop_process

SESSIONLEDGER = Path(sys.executable).with_name("sessionledger")
MULTIPLY = tool_call("multiply", {"a": 6, "b": 7})


def ask(client: openai.OpenAI, text: str, **options) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": text}], **options
    )


@pytest.fixture(scope="module")
def fake_llm_url() -> Iterator[str]:
    """`sessionledger fake-llm --port 0` in its own process: its printed base URL; stopped at the end."""
    process = subprocess.Popen(
        [str(SESSIONLEDGER), "fake-llm", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C as in a terminal
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        assert stop_process(process, signal.SIGINT, 30), "the model's server did not stop on SIGINT"


@pytest.fixture(params=["in-process", "http"])
def client(request) -> Iterator[openai.OpenAI]:
    """An unscripted client of the offline model: in-process, or over HTTP to `sessionledger fake-llm`."""
    if request.param == "in-process":
        with offline_client() as opened:
            yield opened
    else:
        url = request.getfixturevalue("fake_llm_url")
        with openai.OpenAI(base_url=url, api_key="anything", max_retries=0) as opened:
            yield opened


def test_an_unscripted_reply_is_derived_from_the_conversation(client):
    reply = ask(client, "Hello, offline model!")
    assert reply.choices[0].message.content == "You said: Hello, offline model!"
    assert reply.choices[0].finish_reason == "stop"
    again = ask(client, "Hello, offline model!")
    assert again.choices[0].message.content == reply.choices[0].message.content  # deterministic


def test_a_summarization_prompt_gets_the_users_lines(client):
    messages = [
        {"role": "system", "content": "You maintain the running summary of a conversation."},
        {"role": "user", "content": "User: I keep bees.\nAssistant: Nice.\nUser: On my roof.\n"},
    ]
    reply = client.chat.completions.create(model="any", messages=messages)
    assert reply.choices[0].message.content == "The user said: I keep bees.; On my roof.."


def test_a_streamed_reply_arrives_in_chunks_that_add_up(client):
    chunks = list(ask(client, "stream this please", stream=True))
    assert len(chunks) > 3
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "You said: stream this please"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_the_models_route_lists_the_offline_model(client):
    assert [model.id for model in client.models.list()] == ["offline"]


def test_embeddings_are_the_hashed_bag_of_words(client):
    data = client.embeddings.create(model="any", input=["bees on the roof", "the roof bees", "tax law"]).data
    vectors = [item.embedding for item in data]
    assert vectors[0] == pytest.approx(embedding("bees on the roof"))
    assert len(vectors[0]) == EMBEDDING_DIMENSIONS

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    assert len(client.embeddings.create(model="any", input="x", dimensions=8).data[0].embedding) == 8


def test_json_mode_answers_a_json_object(client):
    reply = ask(client, "hi", response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content or "") == {"reply": "You said: hi"}


def test_a_bad_request_is_an_http_error_not_a_crash(client):
    with pytest.raises(openai.BadRequestError, match="input must be a string"):
        client.embeddings.create(model="any", input=[{"not": "text"}])
    with pytest.raises(openai.NotFoundError, match="no route POST"):
        client.completions.create(model="any", prompt="legacy completions")


def test_scripted_replies_come_first_tool_calls_included_then_derived_ones():
    model = OfflineModel([Reply.calling(MULTIPLY), Reply.text("6 times 7 is 42.")])
    with offline_client(model) as client:
        first = ask(client, "What is 6 times 7?").choices[0]
        assert first.finish_reason == "tool_calls"
        (call,) = first.message.tool_calls or []
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
            MULTIPLY.id,
            "multiply",
            {"a": 6, "b": 7},
        )
        assert ask(client, "and?").choices[0].message.content == "6 times 7 is 42."
        model.enqueue(Reply.text("queued later"))
        assert ask(client, "again").choices[0].message.content == "queued later"
        assert ask(client, "and now?").choices[0].message.content == "You said: and now?"
    assert tool_call("multiply", {"a": 6, "b": 7}) == MULTIPLY  # the id is derived, so runs repeat


def test_a_streamed_tool_call_is_put_back_together_by_the_client():
    client = offline_client([Reply.calling(MULTIPLY, content="Let me compute.")])
    with (
        client,
        client.chat.completions.stream(model="any", messages=[{"role": "user", "content": "6*7?"}]) as s,
    ):
        final = s.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Let me compute."
    assert message.tool_calls and message.tool_calls[0].function.arguments == MULTIPLY.arguments


def test_the_async_client_answers_in_process_too():
    async def run() -> tuple[str | None, list[str]]:
        async with offline_async_client([Reply.text("async hello")]) as client:
            reply = await client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "hi"}]
            )
            streamed = await client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            pieces = [c.choices[0].delta.content or "" async for c in streamed]
            return reply.choices[0].message.content, pieces

    content, pieces = asyncio.run(run())
    assert content == "async hello"
    assert "".join(pieces) == "You said: hi"


def test_a_hundred_clients_calling_the_server_at_once_are_all_answered(fake_llm_url):
    """An agent server's burst of model calls: the server takes every connection (the standard
    library's backlog of 5 reset some of them)."""

    async def run() -> list[str | None]:
        async with openai.AsyncOpenAI(base_url=fake_llm_url, api_key="anything", max_retries=0) as client:
            replies = await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model="any", messages=[{"role": "user", "content": f"n{n}"}]
                    )
                    for n in range(100)
                )
            )
        return [reply.choices[0].message.content for reply in replies]

    assert asyncio.run(run()) == [f"You said: n{n}" for n in range(100)]


def test_the_structured_summarizer_gets_json_that_fits_its_schema():
    with offline_client() as client:
        summarizer = StructuredSummarizer("any", client=client)
        summary = summarizer.summarize_structured(
            "Summarize the conversation.", "User: I plan a trip to Kyoto in April.\nAssistant: Lovely."
        )
        summarizer.close()  # a shared client stays open
        assert ask(client, "still open").choices[0].message.content == "You said: still open"
    assert summary is not None
    assert summary.summary == "The user said: I plan a trip to Kyoto in April.."
    assert 0 <= summary.confidence <= 10


def test_a_summarizer_on_a_shared_client_keeps_its_own_timeout_and_retries():
    with offline_client() as client:
        summarizer = OpenAISummarizer("any", client=client, timeout=7, max_retries=1)
        assert summarizer.summarize("Summarize.", "User: bees\n") == "The user said: bees."
        assert (summarizer._client.timeout, summarizer._client.max_retries) == (7, 1)
        assert (client.timeout, client.max_retries) != (7, 1)


def test_memory_chat_runs_a_recall_tool_call_on_the_offline_client(tmp_path):
    """The README's MemoryChat block, offline: a scripted conversation_search answered by MemoryChat."""
    search = tool_call("conversation_search", {"innerThought": "look back", "query": "teal"})
    script = [Reply.text("Noted."), Reply.calling(search), Reply.text("Teal.")]
    with open_service(f"sqlite:///{tmp_path / 'chat.db'}") as service, offline_client(script) as client:
        chat = MemoryChat(client, SessionMemory(service), model="any", recall=RecallTools(service))
        session_id = service.create_session("alice").id
        chat.complete(session_id, [UserMessage("My favourite colour is teal.")], user_id="alice")
        answer = chat.complete(session_id, [UserMessage("Which colour?")], user_id="alice")
        assert answer.choices[0].message.content == "Teal."
        (result,) = [r for e in service.get_events(session_id) for r in e.message.tool_responses]
        assert "My favourite colour is teal." in result.content


def test_fake_llm_serves_its_script_until_ctrl_c_then_exits_cleanly_and_frees_its_port(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([{"tool_calls": [{"name": "multiply", "arguments": {"a": 6, "b": 7}}]}, "42."])
    )
    process = subprocess.Popen(
        [str(SESSIONLEDGER), "fake-llm", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(f"{url}/models", timeout=10) as answer:
            assert json.load(answer)["data"][0]["id"] == "offline"
        with openai.OpenAI(base_url=url, api_key="anything", max_retries=0) as client:
            messages = [{"role": "user", "content": "6*7?"}]
            with client.chat.completions.stream(model="any", messages=messages) as stream:
                (call,) = stream.get_final_completion().choices[0].message.tool_calls or []
            assert (call.id, call.function.name, call.function.arguments) == MULTIPLY
            assert ask(client, "and?").choices[0].message.content == "42."
            assert ask(client, "then?").choices[0].message.content == "You said: then?"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (process.returncode, out, err) == (0, "", "")
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server would: TIME_WAIT is fine
        probe.bind(("127.0.0.1", port))  # nobody listens there any more


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "error: --port must be between 0 and 65535, not 70000"),
        (["--port", "{busy}"], "error: cannot listen on 127.0.0.1:{busy}: Address already in use"),
        (
            ["--port", "0", "--script", "{tmp}/absent.json"],
            "error: --script {tmp}/absent.json: No such file or directory",
        ),
        (
            ["--port", "0", "--script", "{tmp}/bad.json"],
            "error: --script {tmp}/bad.json: reply 2 of the script is not a string or an object with content "
            'and/or tool_calls ([{{"name": ..., "arguments": {{...}}}}])',
        ),
    ],
)
def test_fake_llm_with_a_bad_port_or_script_says_so_in_one_line(args, message, tmp_path):
    (tmp_path / "bad.json").write_text('["fine", {"tool_calls": [{"arguments": {}}]}]')
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        done = subprocess.run(
            [str(SESSIONLEDGER), "fake-llm", *(a.format(busy=port, tmp=tmp_path) for a in args)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
        )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        message.format(busy=port, tmp=tmp_path) + "\n",
    )
