"""The recall MCP server of bearer tokens (`recall_server(service, None)`) answers for no one when a
message did not come through `BearerTokens`: connected in-process (no HTTP request at all), every
call is refused, one line, and nothing of the ledger is shown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.types import TextContent
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.workers.cli.mcp_server import recall_server


def test_without_a_bearer_token_request_no_call_answers_for_anyone() -> None:
    with open_service("memory://") as service:
        service.create_session("ada", session_id="trip")
        service.append_message("trip", UserMessage("Kyoto in April"))

        async def main() -> dict[str, Any]:
            async with Client(recall_server(service, None)) as client:
                tool = await client.call_tool("cross_session_search", {"query": "kyoto"})
                errors = []
                for read in (client.list_resources(), client.read_resource("session://trip/window")):
                    with pytest.raises(MCPError) as refused:
                        await read
                    errors.append(refused.value.message)
                (content,) = tool.content
                assert isinstance(content, TextContent)
                return {"tool": (tool.is_error, content.text), "errors": errors}

        found = asyncio.run(main())
    assert found["tool"] == (
        True,
        "tool 'cross_session_search' failed: RuntimeError (the server's log has the details)",
    )
    assert all("\n" not in message and "Kyoto" not in message for message in found["errors"])


def test_a_blank_user_is_refused() -> None:
    with open_service("memory://") as service, pytest.raises(ValueError, match="user_id must not be empty"):
        recall_server(service, " ")
