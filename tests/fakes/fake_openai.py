"""A local fake OpenAI-compatible server, so tests run the real `openai` client over real HTTP.

`POST /v1/chat/completions` answers with scripted replies (`Reply.text`, `.json`, `.status_code`, `.slow`,
`.malformed_json`, `.refused`, `.blank`, `.garbage`): queued ones first, then `fallback`. Every
request is recorded (`requests`). `POST /v1/embeddings` answers with `fake_embedding(text)`, a
hashed bag of words (texts sharing words are close), unless a queued `embedding_failures` reply
says otherwise; those requests are recorded in `embedding_requests`. Registered as a pytest
plugin: the `fake_openai` fixture.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

COMPLETIONS_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
EMBEDDING_DIMENSIONS = 64


def fake_embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector: each lowercase word adds +-1 at a slot its hash picks."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dimensions] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


@dataclass(frozen=True)
class Reply:
    """One scripted answer; build them with the class methods."""

    status: int = 200
    content: str | None = None
    refusal: str | None = None
    delay: float = 0.0
    finish_reason: str = "stop"
    raw_body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, content: str) -> Reply:
        return cls(content=content)

    @classmethod
    def json(cls, data: Any) -> Reply:
        return cls(content=json.dumps(data))

    @classmethod
    def malformed_json(cls, content: str = '{"title": "Cut short", "summary": ') -> Reply:
        return cls(content=content, finish_reason="length")

    @classmethod
    def refused(cls, reason: str = "I'm sorry, I can't help with that.") -> Reply:
        return cls(refusal=reason)

    @classmethod
    def blank(cls) -> Reply:
        return cls(content="   \n")

    @classmethod
    def status_code(cls, status: int, message: str = "the fake server failed") -> Reply:
        """An error status; `retry-after-ms` keeps the client's retries fast."""
        body = json.dumps({"error": {"message": message, "type": "server_error", "code": None}}).encode()
        return cls(status=status, raw_body=body, headers={"retry-after-ms": "10"})

    @classmethod
    def slow(cls, delay: float, content: str = "A slow summary.") -> Reply:
        return cls(content=content, delay=delay)

    @classmethod
    def garbage(cls) -> Reply:
        """A 200 whose body is not JSON at all."""
        return cls(raw_body=b"<html>not json</html>")

    def body(self, model: str) -> bytes:
        if self.raw_body is not None:
            return self.raw_body
        message = {"role": "assistant", "content": self.content, "refusal": self.refusal}
        return json.dumps(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "finish_reason": self.finish_reason, "logprobs": None}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeOpenAI:
    """The server; `base_url` is what to give `openai.OpenAI(base_url=...)`."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.fallback = Reply.text("A fake summary.")
        self.requests: list[RecordedRequest] = []
        self.embedding_failures: deque[Reply] = deque()
        self.embedding_requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self.replies.popleft() if self.replies else self.fallback

    def embeddings_reply(self, request: RecordedRequest) -> tuple[int, bytes, dict[str, str]]:
        """The next queued failure, else the fake embeddings of the request's input."""
        with self._lock:
            self.embedding_requests.append(request)
            failure = self.embedding_failures.popleft() if self.embedding_failures else None
        if failure is not None:
            return failure.status, failure.body(""), failure.headers
        texts = request.body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        data = [
            {"object": "embedding", "index": i, "embedding": fake_embedding(str(text))}
            for i, text in enumerate(texts)
        ]
        body = {
            "object": "list",
            "data": data,
            "model": request.body.get("model", ""),
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }
        return 200, json.dumps(body).encode(), {}

    def wait(self, seconds: float) -> None:
        """Sleep for a slow reply, but wake up at shutdown."""
        self._stopping.wait(seconds)

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            body = json.loads(raw) if raw else {}
            if self.path == EMBEDDINGS_PATH:
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._send(*fake.embeddings_reply(RecordedRequest(self.path, headers, body)))
                return
            if self.path != COMPLETIONS_PATH:
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode(), {})
                return
            reply = fake.next_reply(
                RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if reply.delay:
                fake.wait(reply.delay)
            self._send(reply.status, reply.body(body.get("model", "")), reply.headers)

        def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output clean."""

    return Handler


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake server for one test."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
