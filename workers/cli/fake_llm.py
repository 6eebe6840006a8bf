"""`sessionledger fake-llm`: the built-in offline model as an OpenAI-compatible server for other processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from sessionledger.workers.cli.app import command, fail


@command
def fake_llm(
    port: Annotated[int, typer.Option("--port", help="The port to listen on; 0 picks a free one.")],
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    script: Annotated[
        Path | None,
        typer.Option(
            "--script",
            help='Replies to give first, in order: a JSON list of texts and {"content", "tool_calls": '
            '[{"name", "arguments"}]} objects; then derived replies.',
        ),
    ] = None,
) -> None:
    """Serve the offline model (deterministic chat completions, streaming, embeddings) until interrupted.

    Point a client at the printed base URL: OPENAI_BASE_URL=<url> OPENAI_API_KEY=anything.
    """
    # imported here, not with the module: every command registers this one
    from sessionledger.infrastructure.offline_model import OfflineModel, OfflineServer, script_from_json

    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535, not {port}")
    try:
        replies = [] if script is None else script_from_json(json.loads(script.read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:  # unreadable, not JSON, not a script
        fail(f"--script {script}: {getattr(error, 'strerror', None) or error}")
    try:
        server = OfflineServer(OfflineModel(replies), host=host, port=port)
    except OSError as error:
        fail(f"cannot listen on {host}:{port}: {error.strerror or error}")
    print(server.base_url, flush=True)  # flushed: the process that started this one reads it
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
