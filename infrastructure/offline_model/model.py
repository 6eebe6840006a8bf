"""The offline model's request handler, shared by the in-process clients and the HTTP server."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sessionledger.infrastructure.offline_model.replies import (
    EMBEDDING_DIMENSIONS,
    Reply,
    derived_reply,
    embedding,
    server_sent_events,
)

MODEL_NAME = "offline"


@dataclass(frozen=True)
class Request:
    """One request as the model sees it: the URL path, lowercase headers, the JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class Response:
    """One answer: a JSON `body`, or (for a streamed completion) server-sent `events`.

    `cut` makes the HTTP server drop the connection after the events, with no end of stream (a
    failure for tests of streaming clients; the in-process transport sends what there is)."""

    status: int = 200
    body: bytes = b""
    events: tuple[bytes, ...] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    cut: bool = False

    @property
    def content_type(self) -> str:
        return "application/json" if self.events is None else "text/event-stream"


def json_response(status: int, data: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status, json.dumps(data).encode(), headers=headers or {})


def error_response(status: int, message: str) -> Response:
    return json_response(
        status, {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    )


class OfflineModel:
    """A deterministic OpenAI-compatible model: `POST .../chat/completions` answers with the script's
    next reply, else with `derived_reply` (plain or streamed, `stream=True`); `POST .../embeddings`
    with `embedding(text)`; `GET .../models` lists the one model. Thread-safe.

    `script` is a sequence of `Reply`s (`Reply.text`, `Reply.json`, `Reply.calling(tool_call(...))`)
    given out in order, one per completion request; `enqueue` adds more.
    """

    def __init__(self, script: Iterable[Reply] = ()) -> None:
        self._script: deque[Reply] = deque(script)
        self._lock = threading.Lock()

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response:
        """Route one HTTP exchange; a body that is not a JSON object is a 400."""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return error_response(400, "the request body is not JSON")
        if not isinstance(body, dict):
            return error_response(400, "the request body is not a JSON object")
        request = Request(path, {name.lower(): value for name, value in headers.items()}, body)
        if method == "POST" and path.endswith("/chat/completions"):
            return self.complete(request)
        if method == "POST" and path.endswith("/embeddings"):
            return self.embed(request)
        if method == "GET" and path.endswith("/models"):
            return json_response(200, {"object": "list", "data": [_model_card()]})
        return error_response(404, f"the offline model has no route {method} {path}")

    def next_reply(self, request: Request) -> Reply:
        """The script's next reply, else one derived from the request."""
        scripted = self.scripted()
        return derived_reply(request.body) if scripted is None else scripted

    def scripted(self) -> Reply | None:
        """Take the script's next reply, if any is left."""
        with self._lock:
            return self._script.popleft() if self._script else None

    def complete(self, request: Request) -> Response:
        return self.respond(self.next_reply(request), request)

    def respond(self, reply: Reply, request: Request) -> Response:
        """`reply` as the request asked for it: one `chat.completion`, or its chunks when streamed."""
        model = str(request.body.get("model") or MODEL_NAME)
        if request.body.get("stream") is True:
            return Response(events=tuple(server_sent_events(reply.chunks(model))))
        return json_response(200, reply.completion(model))

    def embed(self, request: Request) -> Response:
        texts = request.body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            return error_response(400, "input must be a string or a list of strings")
        dimensions = request.body.get("dimensions")
        size = dimensions if isinstance(dimensions, int) and dimensions > 0 else EMBEDDING_DIMENSIONS
        data = [
            {"object": "embedding", "index": i, "embedding": embedding(text, size)}
            for i, text in enumerate(texts)
        ]
        return json_response(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.body.get("model", MODEL_NAME),
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            },
        )


def _model_card() -> dict[str, Any]:
    return {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "sessionledger"}
