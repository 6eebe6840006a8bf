"""The shipped offline model (`sessionledger.infrastructure.offline_model`) as a pytest fixture, with the
failure modes only tests need, so tests run the real `openai` client over real HTTP.

`POST /v1/chat/completions` answers with scripted replies (`Reply.text`, `.json`, `.calling` for tool
calls, from the shipped model; `.status_code`, `.slow`, `.malformed_json`, `.refused`, `.blank`,
`.garbage`, `.cut_stream` here): queued ones first, then `fallback`. A request with `"stream": true`
gets the reply as server-sent chunks (`.cut_stream` breaks the connection part way). Every request is
recorded (`requests`). `POST /v1/embeddings` answers with `fake_embedding(text)`, the shipped model's
hashed bag of words, unless a queued `embedding_failures` reply says otherwise; those requests are
recorded in `embedding_requests`. Registered as a pytest plugin: the `fake_openai` fixture.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import pytest
from sessionledger.infrastructure.offline_model import (
    EMBEDDING_DIMENSIONS,
    OfflineModel,
    OfflineServer,
    Response,
)
from sessionledger.infrastructure.offline_model import Reply as OfflineReply
from sessionledger.infrastructure.offline_model import Request as RecordedRequest
from sessionledger.infrastructure.offline_model import embedding as fake_embedding

__all__ = ["EMBEDDING_DIMENSIONS", "FakeOpenAI", "RecordedRequest", "Reply", "fake_embedding"]


@dataclass(frozen=True)
class Reply(OfflineReply):
    """One scripted answer, with the failures a test can ask for; build them with the class methods."""

    status: int = 200
    delay: float = 0.0
    raw_body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None

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
    def cut_stream(cls, content: str, after: int = 2) -> Reply:
        """Streamed, the connection breaks after `after` chunks (no finish, no [DONE])."""
        return cls(content=content, cut_after=after)


class FakeOpenAI(OfflineModel):
    """The offline model on a loopback server; `base_url` is what to give `openai.OpenAI(base_url=...)`."""

    def __init__(self) -> None:
        super().__init__()
        self.fallback: OfflineReply = Reply.text("A fake summary.")
        self.requests: list[RecordedRequest] = []
        self.embedding_failures: deque[Reply] = deque()
        self.embedding_requests: list[RecordedRequest] = []
        self._record = threading.Lock()
        self._stopping = threading.Event()
        self._server = OfflineServer(self)

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def next_reply(self, request: RecordedRequest) -> OfflineReply:
        """Recorded; the queued reply, else `fallback`."""
        with self._record:
            self.requests.append(request)
        scripted = self.scripted()
        return self.fallback if scripted is None else scripted

    def complete(self, request: RecordedRequest) -> Response:
        reply = self.next_reply(request)
        if not isinstance(reply, Reply):
            return self.respond(reply, request)
        if reply.delay:
            self._stopping.wait(reply.delay)  # a slow reply, but wake up at shutdown
        if reply.raw_body is not None:
            return Response(reply.status, reply.raw_body, headers=reply.headers)
        response = self.respond(reply, request)
        if reply.cut_after is not None and response.events is not None:
            return replace(response, events=response.events[: reply.cut_after], cut=True)
        return response

    def embed(self, request: RecordedRequest) -> Response:
        """Recorded; the next queued failure, else the fake embeddings of the request's input."""
        with self._record:
            self.embedding_requests.append(request)
            failure = self.embedding_failures.popleft() if self.embedding_failures else None
        if failure is None:
            return super().embed(request)
        return Response(failure.status, failure.raw_body or b"", headers=failure.headers)

    def start(self) -> FakeOpenAI:
        self._server.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.stop()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake server for one test."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
