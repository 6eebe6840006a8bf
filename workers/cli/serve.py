"""`sessionledger serve`: the read-only audit page and the HTTP session API (`sessionledger.workers.web`)
on uvicorn."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from sessionledger.workers.cli.app import DatabaseUrl, command, fail, listening_socket, settings_for

__all__ = ["serve"]

NO_EXTRA = "the audit page needs the web extra: pip install 'sessionledger[web]'"


@command
def serve(
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port to listen on.")] = 8080,
    database_url: DatabaseUrl = None,
    digest_dir: Annotated[
        Path | None,
        typer.Option(
            "--digest-dir", help="Where the ledger's digests are kept: pages verify against the latest."
        ),
    ] = None,
) -> None:
    """Serve the read-only audit page (sessions, timelines, windows, what the model saw, verify,
    exports, proofs) and the HTTP session API under /api/v1/; tokens from `sessionledger token create`."""
    if not 1 <= port <= 65535:
        fail(f"--port must be between 1 and 65535, not {port}")
    if digest_dir is not None and not digest_dir.is_dir():
        fail(f"--digest-dir {digest_dir} is not a directory")
    try:  # imported here: every command registers this one, and the extra is optional
        import uvicorn
        from sessionledger.workers.web import audit_app
    except ImportError as error:
        if error.name is None or error.name.split(".")[0] not in (
            "fastapi",
            "uvicorn",
            "starlette",
            "jinja2",
            "multipart",
        ):
            raise
        fail(NO_EXTRA)
    from sessionledger.infrastructure.bootstrap import open_storage
    from sessionledger.workers.telemetry import configure_tracing

    settings = settings_for(database_url)
    configure_tracing(settings, "serve")
    # the pages read through a read-only connection; only the HTTP session API's service writes
    with open_storage(settings, create=False) as storage, open_storage(settings) as writing:
        loop_appends = writing.loop_appends()
        app = audit_app(
            storage.service,
            storage.access_tokens,
            database=settings.database_url,
            digest_dir=digest_dir,
            digest_public_key=settings.digest_public_key,
            writer=writing.service,
            loop_appends=loop_appends,
        )
        listening = listening_socket(host, port)
        print(
            f"serving the audit page at http://{host}:{port}/ and the session API at /api/v1/ "
            "(Ctrl-C stops it)",
            file=sys.stderr,
            flush=True,
        )
        config = uvicorn.Config(app, log_level="warning", server_header=False, access_log=False)
        try:
            uvicorn.Server(config).run(sockets=[listening])
        finally:
            if loop_appends is not None:
                loop_appends.close()
