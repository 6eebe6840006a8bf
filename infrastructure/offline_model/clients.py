"""Real `openai` clients that talk to an `OfflineModel` in-process (no socket), and the examples' choice
between such a client and one configured from the environment."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import openai
from sessionledger.infrastructure.offline_model.model import OfflineModel
from sessionledger.infrastructure.offline_model.replies import Reply

OFFLINE_BASE_URL = "http://offline-model.invalid/v1"
"""The in-process clients' base URL: never resolved, the transport answers first."""
OFFLINE_API_KEY = "offline"
NO_KEY_MESSAGE = "error: no OPENAI_API_KEY set: pass --offline to run against the built-in offline model"


def offline_client(script: Iterable[Reply] | OfflineModel = ()) -> openai.OpenAI:
    """An `openai.OpenAI` whose requests `script` answers in-process: a sequence of `Reply`s (then
    derived replies), or an `OfflineModel` to share between clients."""
    transport = _transport(_model(script))
    return openai.OpenAI(
        api_key=OFFLINE_API_KEY,
        base_url=OFFLINE_BASE_URL,
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=transport),
    )


def offline_async_client(script: Iterable[Reply] | OfflineModel = ()) -> openai.AsyncOpenAI:
    """`offline_client`'s `openai.AsyncOpenAI` twin."""
    transport = _transport(_model(script), asynchronous=True)
    return openai.AsyncOpenAI(
        api_key=OFFLINE_API_KEY,
        base_url=OFFLINE_BASE_URL,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(transport=transport),
    )


def _model(script: Iterable[Reply] | OfflineModel) -> OfflineModel:
    return script if isinstance(script, OfflineModel) else OfflineModel(script)


def _http_library() -> ModuleType:
    """The HTTP library this `openai` is built on: httpx before openai 3, its successor httpx2 since
    (both are the `openai` package's own dependency, and have the same in-process `MockTransport`)."""
    return importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.partition(".")[0])


def _transport(model: OfflineModel, *, asynchronous: bool = False) -> Any:
    """The HTTP library's in-process transport, handing each request to the model's handler (a
    stream arrives whole, as one body of server-sent events). The async client's lets the event
    loop run other tasks while the model answers, as a network round trip would: without it 100
    concurrent requests ran back to back in one step of the loop."""
    http = _http_library()

    def exchange(request: Any) -> Any:
        answer = model.handle(request.method, request.url.path, dict(request.headers), request.read())
        body = answer.body if answer.events is None else b"".join(answer.events)
        headers = {"content-type": answer.content_type, **answer.headers}
        return http.Response(answer.status, headers=headers, content=body)

    async def exchange_async(request: Any) -> Any:
        await asyncio.sleep(0)
        return exchange(request)

    return http.MockTransport(exchange_async if asynchronous else exchange)


def add_offline_option(parser: argparse.ArgumentParser) -> None:
    """The examples' `--offline` flag."""
    parser.add_argument(
        "--offline",
        action="store_true",
        help="answer with the built-in offline model (scripted, deterministic; no key, no network)",
    )


def client_from_args(options: argparse.Namespace, script: Iterable[Reply] = ()) -> openai.OpenAI:
    """With `--offline`, `offline_client(script)`; else an `openai.OpenAI` for the endpoint the
    settings name (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, or their `SESSIONLEDGER_` names). With
    neither, one line on stderr and exit status 2."""
    if options.offline:
        return offline_client(script)
    api_key, base_url = _endpoint()
    return openai.OpenAI(api_key=api_key, base_url=base_url)


def async_client_from_args(options: argparse.Namespace, script: Iterable[Reply] = ()) -> openai.AsyncOpenAI:
    """`client_from_args` for an `openai.AsyncOpenAI`."""
    if options.offline:
        return offline_async_client(script)
    api_key, base_url = _endpoint()
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url)


def _endpoint() -> tuple[str, str | None]:
    """The configured endpoint's key and base URL; a server at a base URL without a key gets a
    placeholder (local OpenAI-compatible servers ignore it, the client insists on one)."""
    from sessionledger.infrastructure.settings import Settings

    settings = Settings()
    if not settings.openai_api_key and not settings.openai_base_url:
        print(NO_KEY_MESSAGE, file=sys.stderr)
        raise SystemExit(2)
    return settings.openai_api_key or OFFLINE_API_KEY, settings.openai_base_url
