"""The HTTP servers of the workers (`/metrics`) and of the offline model: a client that hangs up
mid-request is a debug line, never a traceback on stderr, and the server goes on answering."""

from __future__ import annotations

import logging
import socket
import struct
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from sessionledger.infrastructure.offline_model.server import OfflineServer
from sessionledger.workers.metrics import serve_prometheus


@contextmanager
def metrics_server() -> Iterator[str]:
    server = serve_prometheus(0, lambda: "sessionledger_up 1\n", host="127.0.0.1")
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def offline_model_server() -> Iterator[str]:
    with OfflineServer() as server:
        yield f"{server.base_url}/models"


def _reset_mid_request(url: str) -> None:
    """Connect, send half a request line, and hang up with a reset (SO_LINGER 0), as a health check
    or a client that gave up does."""
    host, port = url.split("/")[2].split(":")
    client = socket.create_connection((host, int(port)))
    client.sendall(b"GET /metr")
    time.sleep(0.1)  # the server's thread is reading the request line
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


@pytest.mark.parametrize("serving", [metrics_server, offline_model_server], ids=["metrics", "offline model"])
def test_a_client_that_hangs_up_is_a_debug_line_not_a_traceback(
    serving: Callable[[], AbstractContextManager[str]],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG, logger="sessionledger.infrastructure.http_listener")
    with serving() as url:
        _reset_mid_request(url)
        deadline = time.monotonic() + 5
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.02)
        with urllib.request.urlopen(url, timeout=5) as answer:
            assert answer.status == 200
    assert [(r.levelno, r.getMessage().split(" (")[0]) for r in caplog.records] == [
        (logging.DEBUG, "a client went away mid-request")
    ]
    assert "Traceback" not in capfd.readouterr().err
