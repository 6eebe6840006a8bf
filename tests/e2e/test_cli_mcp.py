"""`sessionledger mcp` in a real subprocess, driven by the MCP SDK's own client over stdio and
streamable HTTP: the tools answer as `RecallTools.handle`, the resources are what `events --json`
and `timeline --json` print, the user is the server's (Bob's session reads as a missing one), and
every hostile call is one error line after which the server still answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.agents import RecallTools
from sessionledger.workers.cli.mcp_server import MAX_ERROR_CHARS

from tests.e2e.test_readme import README, fenced_blocks, run_block

USER = "ada"
SECRET = "bob's passport number is X1234567"
TRANSPORTS = ["stdio", "http"]


def seed(url: str) -> None:
    """Ada has three sessions (`trip`, `food`, `app/ada/s1`), Bob one (`bob-notes`) holding the secret."""
    with open_service(url) as service:
        service.create_session(USER, session_id="trip")
        service.append_message("trip", UserMessage("I want to see Kyoto in April"))
        service.append_message("trip", AssistantMessage("Kyoto in April: cherry blossoms."))
        service.create_session(USER, session_id="food")
        service.append_message("food", UserMessage("Where can I eat ramen in Kyoto?"))
        service.create_session(USER, session_id="app/ada/s1")  # named as the ADK adapter names them
        service.append_message("app/ada/s1", UserMessage("hello"))
        service.create_session("bob", session_id="bob-notes")
        service.append_message("bob-notes", UserMessage(SECRET))


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'ledger.db'}"
    seed(url)
    return url


def command(url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "sessionledger", "mcp", "--user", USER, "--database-url", url, *extra]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, server: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


@asynccontextmanager
async def connected(transport: str, url: str) -> AsyncIterator[ClientSession]:
    """A client session with a `sessionledger mcp` subprocess, which is gone afterwards."""
    if transport == "stdio":
        with open(os.devnull, "w") as quiet:
            async with (
                stdio_client(StdioServerParameters(command=sys.executable, args=command(url)[1:]), quiet) as (
                    read,
                    write,
                ),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                yield client
        return
    port = free_port()
    server = subprocess.Popen(command(url, "--http", "--port", str(port)), stderr=subprocess.PIPE)
    try:
        wait_for_port(port, server)
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            yield client
        assert server.poll() is None  # it served every call and is still up
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        assert server.stderr is not None
        server.stderr.close()


def run(transport: str, url: str, scenario: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with connected(transport, url) as client:
            return await scenario(client)

    return asyncio.run(main())


async def text_of(client: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    (content,) = result.content
    assert content.type == "text"
    return result.is_error, content.text


def expected(url: str, tool: str, arguments: dict[str, Any], session_id: str = "-") -> str:
    """What `RecallTools.handle` answers in-process, for the same ledger and user."""
    with open_service(url) as service:
        return RecallTools(service).handle(tool, json.dumps(arguments), session_id=session_id, user_id=USER)


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_and_resources_answer_as_the_cli_and_recall_tools_do(ledger: str, transport: str) -> None:
    async def scenario(client: ClientSession) -> dict[str, Any]:
        tools = await client.list_tools()
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        return {
            "tools": {tool.name: tool.input_schema for tool in tools.tools},
            "resources": sorted(resource.uri for resource in resources.resources),
            "templates": sorted(template.uri_template for template in templates.resource_templates),
            "in one": await text_of(client, "conversation_search", {"query": "kyoto", "session_id": "trip"}),
            "page 1": await text_of(
                client, "conversation_search", {"query": "", "session_id": "trip", "page": 1}
            ),
            "across": await text_of(client, "cross_session_search", {"query": "kyoto,ramen"}),
            "all terms": await text_of(
                client, "cross_session_search", {"query": "kyoto,ramen", "match_mode": "all"}
            ),
            "since": await text_of(
                client, "cross_session_search", {"query": "kyoto", "since": "2999-01-01T00:00:00Z"}
            ),
            "window": (await client.read_resource("session://trip/window")).contents[0],
            "timeline": (await client.read_resource("session://trip/timeline")).contents[0],
            "slashed": [
                (await client.read_resource(f"session://{id}/window")).contents[0].text
                for id in ("app%2Fada%2Fs1", "app/ada/s1")
            ],
        }

    found = run(transport, ledger, scenario)
    assert found["tools"]["conversation_search"]["required"] == ["query", "session_id"]
    assert set(found["tools"]["cross_session_search"]["properties"]) == {
        "query",
        "match_mode",
        "since",
        "page",
    }
    assert found["resources"] == [
        f"session://{s}/{v}" for s in ("app%2Fada%2Fs1", "food", "trip") for v in ("timeline", "window")
    ]
    assert found["slashed"][0] == found["slashed"][1] and '"text": "hello"' in found["slashed"][0]
    assert found["templates"] == ["session://{session_id}/timeline", "session://{session_id}/window"]
    assert found["in one"] == (False, expected(ledger, "conversation_search", {"query": "kyoto"}, "trip"))
    assert "cherry blossoms" in found["in one"][1]
    assert found["page 1"] == (False, "No results found.")
    assert found["across"] == (False, expected(ledger, "cross_session_search", {"query": "kyoto,ramen"}))
    assert {item["sessionId"] for item in json.loads(found["across"][1])} == {"trip", "food"}
    assert [item["sessionId"] for item in json.loads(found["all terms"][1])] == ["food"]
    assert found["since"] == (False, "No results found.")
    cli = {
        name: subprocess.run(
            [sys.executable, "-m", "sessionledger", *args, "trip", "--json", "--database-url", ledger],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for name, args in (("window", ["events"]), ("timeline", ["timeline"]))
    }
    for name in ("window", "timeline"):
        assert found[name].mime_type == "application/json"
        assert found[name].text + "\n" == cli[name]


HOSTILE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("conversation_search", {"query": "kyoto"}),  # no session
    ("conversation_search", {"session_id": "trip"}),  # no query
    ("conversation_search", {"query": 5, "session_id": "trip"}),
    ("conversation_search", {"query": "kyoto", "session_id": 7}),
    ("conversation_search", {"query": "kyoto", "session_id": ""}),
    ("conversation_search", {"query": "kyoto", "session_id": "trip", "page": "two"}),
    ("cross_session_search", {}),
    ("cross_session_search", {"query": ["kyoto"]}),
    ("cross_session_search", {"query": "kyoto", "match_mode": 1}),
    ("cross_session_search", {"query": "kyoto", "since": "yesterday\nand more"}),
    ("cross_session_search", {"query": "kyoto", "since": "2026-01-01T00:00:00"}),  # no offset
    ("cross_session_search", {"query": ",".join(f"term{i}" for i in range(10_000))}),
    ("cross_session_search", {"query": "x," * 500_000}),  # 1 MB, 500,000 terms
    ("forget_everything", {"query": "kyoto"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_hostile_calls_are_one_line_errors_and_reach_no_other_user(ledger: str, transport: str) -> None:
    megabyte = "kyoto " * 180_000  # over 1 MB, one keyword

    async def scenario(client: ClientSession) -> dict[str, Any]:
        errors = [await text_of(client, tool, arguments) for tool, arguments in HOSTILE_CALLS]
        resource_errors = []
        for uri in (
            "session://bob-notes/window",
            "session://bob-notes/timeline",
            "session://missing/window",
            "session://missing/timeline",
            "session://trip/everything",
            "file:///etc/passwd",
        ):
            with pytest.raises(MCPError) as raised:
                await client.read_resource(uri)
            resource_errors.append((raised.value.code, raised.value.message))
        return {
            "errors": errors,
            "resource errors": resource_errors,
            "bob's": await text_of(client, "conversation_search", {"query": "", "session_id": "bob-notes"}),
            "missing": await text_of(client, "conversation_search", {"query": "", "session_id": "missing"}),
            "across": await text_of(client, "cross_session_search", {"query": "passport"}),
            "megabyte": await text_of(
                client, "conversation_search", {"query": megabyte, "session_id": "trip"}
            ),
            "megabyte across": await text_of(client, "cross_session_search", {"query": megabyte}),
            "still serving": await text_of(
                client, "conversation_search", {"query": "kyoto", "session_id": "trip"}
            ),
        }

    found = run(transport, ledger, scenario)
    for (tool, arguments), (is_error, text) in zip(HOSTILE_CALLS, found["errors"], strict=True):
        assert is_error, (tool, arguments, text)
        assert "\n" not in text and 0 < len(text) <= MAX_ERROR_CHARS, text
    assert found["errors"][0][1] == "missing required argument 'session_id'"
    assert found["errors"][2][1] == "'query' must be a string"
    assert found["errors"][11][1].endswith("has 10000 search terms; at most 20 are allowed")
    assert found["errors"][-1][1].startswith("unknown tool 'forget_everything'")
    bob_window, bob_timeline, missing_window, missing_timeline, wrong_view, not_ours = found[
        "resource errors"
    ]
    # another user's session is as unknown as a missing one: the same error, but for the id
    assert bob_window == bob_timeline == (-32602, "unknown session 'bob-notes'")
    assert missing_window == missing_timeline == (-32602, "unknown session 'missing'")
    assert wrong_view[0] == not_ours[0] == -32602
    assert wrong_view[1].startswith("unknown resource 'session://trip/everything'")
    assert found["bob's"] == found["missing"] == (False, "No results found.")
    assert found["across"] == (False, "No results found.")  # Bob's secret is not Ada's
    for is_error, text in (found["megabyte"], found["megabyte across"]):
        assert is_error and text.startswith("keyword is at most 200 characters long, got 10"), text
    assert "cherry blossoms" in found["still serving"][1]
    assert SECRET not in json.dumps(found)


@pytest.mark.postgres
@pytest.mark.slow
def test_the_server_reads_a_postgresql_ledger(pg_url: str) -> None:
    seed(pg_url)

    async def scenario(client: ClientSession) -> tuple[bool, str]:
        return await text_of(client, "cross_session_search", {"query": "kyoto"})

    is_error, text = run("stdio", pg_url, scenario)
    assert not is_error and {item["sessionId"] for item in json.loads(text)} == {"trip", "food"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "8000"], "error: --host and --port go with --http"),
        (["--http", "--port", "70000"], "error: --port must be between 1 and 65535, not 70000"),
        (["--user", " "], "error: --user must not be empty"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(ledger: str, args: list[str], message: str) -> None:
    done = subprocess.run(command(ledger, *args), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message + "\n")


def test_no_ledger_is_one_line_and_exit_2(tmp_path: Any) -> None:
    done = subprocess.run(
        command(f"sqlite:///{tmp_path}/none.db"),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "none.db").exists()


def test_help_loads_no_mcp_sdk() -> None:
    """`sessionledger mcp --help` (and every other command) imports the SDK only when it serves."""
    probe = (
        "import sys\n"
        "sys.argv = ['sessionledger', 'mcp', '--help']\n"
        "from sessionledger.workers.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('mcp', 'uvicorn', 'starlette', 'anyio') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "--http" in done.stdout
    assert done.stdout.splitlines()[-1] == "[]"


def test_the_readme_block_prints_the_users_own_session(tmp_path: Any) -> None:
    """The README's "Recall from any MCP client" block, run as test_readme runs every block, finds
    Ada's session through the server."""
    ((line, code),) = [found for found in fenced_blocks(README, "python") if "stdio_client" in found[1]]
    done = run_block(line, code, tmp_path)
    assert done.returncode == 0, done.stderr
    (item,) = json.loads(done.stdout)
    assert (item["sessionId"], item["text"]) == ("trip", "I want to visit Kyoto in April.")
