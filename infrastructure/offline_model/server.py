"""The offline model behind a real HTTP server on loopback, for other processes (`sessionledger fake-llm`)."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from sessionledger.infrastructure.http_listener import HttpListener
from sessionledger.infrastructure.offline_model.model import OfflineModel, Response


class OfflineServer:
    """`model` answering HTTP on `host:port` (port 0: a free one); `base_url` is what an `openai`
    client takes. `start()` serves from a thread, `serve_forever()` from the caller's."""

    def __init__(self, model: OfflineModel | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model or OfflineModel()
        self._server = _Listener((host, port), _handler_for(self.model))
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def start(self) -> OfflineServer:
        self._thread = threading.Thread(target=self.serve_forever, name="offline-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (a `start`ed server) and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> OfflineServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Listener(HttpListener):
    """As many connections waiting to be accepted as the system allows: the standard library's
    backlog of 5 reset the connections of 100 clients calling at once."""

    request_queue_size = socket.SOMAXCONN
    block_on_close = False


def _handler_for(model: OfflineModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def _answer(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            path = self.path.partition("?")[0]  # Azure OpenAI's clients add `?api-version=...`
            response = model.handle(method, path, dict(self.headers.items()), raw)
            try:
                if response.events is None:
                    self._send(response)
                else:
                    self._stream(response)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up; nothing to answer

        def _send(self, response: Response) -> None:
            self.send_response(response.status)
            self.send_header("content-type", response.content_type)
            self.send_header("content-length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(response.body)

        def _stream(self, response: Response) -> None:
            """Chunked transfer, one chunk per event; a cut stream stops mid-body and drops the connection."""
            self.send_response(response.status)
            self.send_header("content-type", response.content_type)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for event in response.events or ():
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()
            if response.cut:
                self.close_connection = True
            else:
                self.wfile.write(b"0\r\n\r\n")

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the caller's output is the conversation, not an access log."""

    return Handler
