"""`sessionledger mcp`: serve recall to MCP clients (`mcp_server.py`), on stdio or streamable HTTP."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from sessionledger.workers.cli.app import DatabaseUrl, cli, fail, listening_socket, settings_for

NO_EXTRA = "the MCP server needs the mcp extra: pip install 'sessionledger[mcp]'"


@cli.command("mcp")
def serve_mcp(
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            help="On stdio (and only there): the user whose sessions the server answers for. No tool "
            "argument or resource names a user, and another user's session is as unknown as a "
            "missing one.",
        ),
    ] = None,
    database_url: DatabaseUrl = None,
    http: Annotated[
        bool,
        typer.Option(
            "--http",
            help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio. Every request needs "
            "`Authorization: Bearer TOKEN` (sessionledger token create --user USER) and answers for "
            "the token's user (an --admin token's too: its own sessions, not every user's); "
            "without a valid token it is answered 401.",
        ),
    ] = False,
    host: Annotated[str | None, typer.Option("--host", help="With --http: the address (127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="With --http: the port (8000).")] = None,
) -> None:
    """Serve recall over the Model Context Protocol, read-only: tools conversation_search and
    cross_session_search, resources session://{session_id}/window and session://{session_id}/timeline.

    Stdio by default, for an MCP client that starts this command itself (--user names its user);
    --http for one that connects, with a bearer token naming the user.
    """
    if http and user is not None:
        fail("--user goes with stdio: on --http each request's bearer token names the user")
    if not http and user is None:
        fail("stdio needs --user (or serve --http, where bearer tokens name the user)")
    if user is not None and not user.strip():
        fail("--user must not be empty")
    if not http and (host is not None or port is not None):
        fail("--host and --port go with --http")
    if port is not None and not 1 <= port <= 65535:
        fail(f"--port must be between 1 and 65535, not {port}")
    try:  # imported here: every command registers this one, and the extra is optional
        import anyio
        from sessionledger.workers.cli.mcp_server import recall_server, serve_http, serve_stdio
    except ImportError as error:
        if error.name is None or error.name.split(".")[0] not in ("mcp", "uvicorn", "starlette"):
            raise
        fail(NO_EXTRA)
    from sessionledger.infrastructure.bootstrap import open_storage

    with open_storage(settings_for(database_url), create=False) as storage:
        server = recall_server(storage.service, user)
        try:
            if http:
                host, port = host or "127.0.0.1", port or 8000
                listening = listening_socket(host, port)
                print(
                    f"serving MCP at http://{host}:{port}/mcp for the user of each request's bearer token",
                    file=sys.stderr,
                    flush=True,
                )
                anyio.run(serve_http, server, storage.access_tokens, host, listening)
            else:
                anyio.run(serve_stdio, server)
        except KeyboardInterrupt:
            pass
