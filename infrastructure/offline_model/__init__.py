"""An offline OpenAI-compatible model: deterministic chat completions (text, streamed chunks, scripted
tool calls, JSON for `response_format`) and embeddings, with no key and no network.

`offline_client()` and `offline_async_client()` are real `openai` clients whose transport hands each
request to an `OfflineModel` in the same process; `OfflineServer` puts the same handler behind an
HTTP server on loopback for other processes (`sessionledger fake-llm --port N`). The examples' `--offline`
flag goes through `add_offline_option` and `client_from_args`.

    client = offline_client([Reply.calling(tool_call("multiply", {"a": 6, "b": 7})), Reply.text("42.")])
"""

from __future__ import annotations

from sessionledger.infrastructure.offline_model.clients import (
    NO_KEY_MESSAGE,
    OFFLINE_BASE_URL,
    add_offline_option,
    async_client_from_args,
    client_from_args,
    offline_async_client,
    offline_client,
)
from sessionledger.infrastructure.offline_model.model import OfflineModel, Request, Response
from sessionledger.infrastructure.offline_model.replies import (
    EMBEDDING_DIMENSIONS,
    Reply,
    ToolCall,
    derived_reply,
    embedding,
    script_from_json,
    tool_call,
)
from sessionledger.infrastructure.offline_model.server import OfflineServer

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "NO_KEY_MESSAGE",
    "OFFLINE_BASE_URL",
    "OfflineModel",
    "OfflineServer",
    "Reply",
    "Request",
    "Response",
    "ToolCall",
    "add_offline_option",
    "async_client_from_args",
    "client_from_args",
    "derived_reply",
    "embedding",
    "offline_async_client",
    "offline_client",
    "script_from_json",
    "tool_call",
]
