"""A local fake OpenAI-compatible server, so tests run the real `openai` client over real HTTP.

`POST /v1/chat/completions` answers with scripted replies (`Reply.text`, `.json`, `.status_code`, `.slow`,
`.malformed_json`, `.refused`, `.blank`, `.garbage`, `.calling` for tool calls): queued ones first,
then `fallback`. A request with `"stream": true` gets the reply as server-sent chunks
(`.cut_stream` breaks the connection part way). Every request is recorded (`requests`).
`POST /v1/embeddings` answers with `fake_embedding(text)`, a hashed bag of words (texts sharing
words are close), unless a queued `embedding_failures` reply says otherwise; those requests are
recorded in `embedding_requests`. Registered as a pytest plugin: the `fake_openai` fixture.
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
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    cut_after: int | None = None

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

    @classmethod
    def calling(cls, *calls: tuple[str, str, str], content: str | None = None) -> Reply:
        """An assistant reply asking for tool calls, each `(id, name, arguments JSON text)`."""
        return cls(content=content, tool_calls=tuple(calls), finish_reason="tool_calls")

    @classmethod
    def cut_stream(cls, content: str, after: int = 2) -> Reply:
        """Streamed, the connection breaks after `after` chunks (no finish, no [DONE])."""
        return cls(content=content, cut_after=after)

    def _wire_calls(self) -> list[dict[str, Any]]:
        return [
            {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for id, name, arguments in self.tool_calls
        ]

    def stream_chunks(self, model: str) -> list[bytes]:
        """The reply as chat.completion.chunk SSE events: role, content in pieces, calls, finish."""
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        text = self.content or ""
        deltas += [{"content": text[i : i + 4]} for i in range(0, len(text), 4)]
        for index, (id, name, arguments) in enumerate(self.tool_calls):
            head = {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
            deltas.append({"tool_calls": [head]})
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        events = [{"delta": delta, "finish_reason": None} for delta in deltas] + [
            {"delta": {}, "finish_reason": self.finish_reason}
        ]
        return [
            b"data: "
            + json.dumps(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "logprobs": None, **event}],
                }
            ).encode()
            + b"\n\n"
            for event in events
        ] + [b"data: [DONE]\n\n"]

    def body(self, model: str) -> bytes:
        if self.raw_body is not None:
            return self.raw_body
        message: dict[str, Any] = {"role": "assistant", "content": self.content, "refusal": self.refusal}
        if self.tool_calls:
            message["tool_calls"] = self._wire_calls()
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
            if body.get("stream") is True and reply.status == 200 and reply.raw_body is None:
                self._stream(reply, body.get("model", ""))
                return
            self._send(reply.status, reply.body(body.get("model", "")), reply.headers)

        def _stream(self, reply: Reply, model: str) -> None:
            """Chunked transfer; a cut stream stops mid-body and drops the connection."""
            chunks = reply.stream_chunks(model)
            if reply.cut_after is not None:
                chunks = chunks[: reply.cut_after]
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                if reply.cut_after is None:
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

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
