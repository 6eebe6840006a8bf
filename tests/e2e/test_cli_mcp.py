"""`sessionledger mcp` in a real subprocess, driven by the MCP SDK's own client over stdio and
streamable HTTP: the tools answer as `RecallTools.handle`, the resources are what `events --json`
and `timeline --json` print, the user is the server's on stdio and the bearer token's on HTTP
(Bob's session reads as a missing one), a request without a valid token is refused with 401, and
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

import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextResourceContents
from sessionledger.domain import AssistantMessage, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.agents import RecallTools
from sessionledger.workers.cli.mcp_server import MAX_ERROR_CHARS

from tests.e2e.queue_deployment import stop_process
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


def cli(url: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sessionledger", *args, "--database-url", url],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def make_token(url: str, user: str, *flags: str) -> str:
    """A token as `sessionledger token create` prints it (its last line)."""
    return cli(url, "token", "create", "--user", user, *flags).splitlines()[-1]


@pytest.fixture(scope="module")
def tokens(ledger: str) -> dict[str, str]:
    """Ada's, Bob's, an admin's (Carol, who has no sessions) and a revoked one of Ada's."""
    made = {
        "ada": make_token(ledger, USER),
        "bob": make_token(ledger, "bob"),
        "admin": make_token(ledger, "carol", "--admin"),
        "revoked": make_token(ledger, USER),
    }
    cli(ledger, "token", "revoke", made["revoked"])
    return made


def command(url: str, *extra: str) -> list[str]:
    """The stdio server for Ada, or with `--http` the server of bearer tokens (no `--user`)."""
    who = [] if "--http" in extra else ["--user", USER]
    return [sys.executable, "-m", "sessionledger", "mcp", *who, "--database-url", url, *extra]


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
async def http_server(url: str) -> AsyncIterator[str]:
    """A `sessionledger mcp --http` subprocess, by its endpoint; still up at the end, then stopped."""
    port = free_port()
    server = subprocess.Popen(command(url, "--http", "--port", str(port)), stderr=subprocess.PIPE)
    try:
        wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}/mcp"
        assert server.poll() is None  # it served every call and is still up
    finally:
        stop_process(server, signal.SIGINT, 10)
        assert server.stderr is not None
        server.stderr.close()


@asynccontextmanager
async def http_client(endpoint: str, token: str) -> AsyncIterator[ClientSession]:
    """The SDK's client over streamable HTTP, sending `token` as its bearer token."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(endpoint, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


@asynccontextmanager
async def connected(transport: str, url: str, token: str = "") -> AsyncIterator[ClientSession]:
    """A client session (Ada's) with a `sessionledger mcp` subprocess, which is gone afterwards."""
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
    async with http_server(url) as endpoint, http_client(endpoint, token) as client:
        yield client


def run(
    transport: str, url: str, scenario: Callable[[ClientSession], Awaitable[Any]], token: str = ""
) -> Any:
    async def main() -> Any:
        async with connected(transport, url, token) as client:
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
def test_tools_and_resources_answer_as_the_cli_and_recall_tools_do(
    ledger: str, tokens: dict[str, str], transport: str
) -> None:
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

    found = run(transport, ledger, scenario, tokens["ada"])
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
    printed = {name: cli(ledger, name, "trip", "--json") for name in ("events", "timeline")}
    for name, command_name in (("window", "events"), ("timeline", "timeline")):
        assert found[name].mime_type == "application/json"
        assert found[name].text + "\n" == printed[command_name]


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
def test_hostile_calls_are_one_line_errors_and_reach_no_other_user(
    ledger: str, tokens: dict[str, str], transport: str
) -> None:
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

    found = run(transport, ledger, scenario, tokens["ada"])
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


async def what_is_seen(client: ClientSession) -> dict[str, Any]:
    """The caller's sessions, as the resources list them and as a search across sessions finds them."""
    resources = await client.list_resources()
    found: dict[str, Any] = {"resources": sorted(str(r.uri) for r in resources.resources)}
    for query in ("kyoto", "passport"):
        found[query] = await text_of(client, "cross_session_search", {"query": query})
    found["in bob-notes"] = await text_of(
        client, "conversation_search", {"query": "", "session_id": "bob-notes"}
    )
    found["in trip"] = await text_of(client, "conversation_search", {"query": "kyoto", "session_id": "trip"})
    found["bob's window"] = await read_or_error(client, "session://bob-notes/window")
    found["trip window"] = await read_or_error(client, "session://trip/window")
    return found


async def read_or_error(client: ClientSession, uri: str) -> str:
    try:
        (content,) = (await client.read_resource(uri)).contents
    except MCPError as error:
        return f"error: {error.message}"
    assert isinstance(content, TextResourceContents)
    return content.text


@pytest.mark.slow
def test_on_http_each_token_answers_for_its_own_user_at_the_same_time(
    ledger: str, tokens: dict[str, str]
) -> None:
    """Ada, Bob and an admin (Carol) on one server, their sessions open at once: each sees only
    their own sessions, and the admin token is Carol's alone (recall does not widen to every user)."""

    async def main() -> dict[str, dict[str, Any]]:
        async with (
            http_server(ledger) as endpoint,
            http_client(endpoint, tokens["ada"]) as ada,
            http_client(endpoint, tokens["bob"]) as bob,
            http_client(endpoint, tokens["admin"]) as admin,
        ):
            seen = await asyncio.gather(what_is_seen(ada), what_is_seen(bob), what_is_seen(admin))
            return dict(zip(("ada", "bob", "admin"), seen, strict=True))

    seen = asyncio.run(main())
    ada, bob, admin = seen["ada"], seen["bob"], seen["admin"]
    assert ada["resources"] == [
        f"session://{s}/{v}" for s in ("app%2Fada%2Fs1", "food", "trip") for v in ("timeline", "window")
    ]
    assert {item["sessionId"] for item in json.loads(ada["kyoto"][1])} == {"trip", "food"}
    assert "cherry blossoms" in ada["in trip"][1] and "Kyoto" in ada["trip window"]
    assert ada["passport"] == ada["in bob-notes"] == (False, "No results found.")
    assert ada["bob's window"] == "error: unknown session 'bob-notes'"
    assert bob["resources"] == ["session://bob-notes/timeline", "session://bob-notes/window"]
    assert [item["sessionId"] for item in json.loads(bob["passport"][1])] == ["bob-notes"]
    assert SECRET in bob["bob's window"] and SECRET in bob["in bob-notes"][1]
    assert bob["kyoto"] == bob["in trip"] == (False, "No results found.")
    assert bob["trip window"] == "error: unknown session 'trip'"
    assert admin["resources"] == []
    for key in ("kyoto", "passport", "in bob-notes", "in trip"):
        assert admin[key] == (False, "No results found."), key
    assert admin["bob's window"].startswith("error: unknown session")
    assert SECRET not in json.dumps([ada, admin])


def initialize_request() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }


@pytest.mark.slow
def test_on_http_no_token_or_a_bad_one_is_refused_with_401_before_mcp(
    ledger: str, tokens: dict[str, str]
) -> None:
    """No header, another scheme, text that is no token, a wrong secret, a revoked token: 401 with
    `WWW-Authenticate: Bearer` on every method, the token never echoed; a good token gets in."""
    token_id = tokens["ada"].rsplit("_", 1)[0]
    refused = {
        "none": {},
        "basic": {"Authorization": "Basic YWRhOmFkYQ=="},
        "bare bearer": {"Authorization": "Bearer"},
        "garbage": {"Authorization": "Bearer not-a-token"},
        "wrong secret": {"Authorization": f"Bearer {token_id}_{'A' * 43}"},
        "revoked": {"Authorization": f"Bearer {tokens['revoked']}"},
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def main() -> dict[str, Any]:
        answers: dict[str, Any] = {}
        async with http_server(ledger) as endpoint, httpx2.AsyncClient(timeout=60) as http:
            for name, auth in refused.items():
                for method in ("POST", "GET", "DELETE"):
                    response = await http.request(
                        method, endpoint, headers={**headers, **auth}, json=initialize_request()
                    )
                    answers[f"{name} {method}"] = (
                        response.status_code,
                        response.headers.get("www-authenticate", ""),
                        response.text,
                    )
            good = {**headers, "Authorization": f"Bearer {tokens['ada']}"}
            response = await http.post(endpoint, headers=good, json=initialize_request())
            answers["good"] = response.status_code
        return answers

    answers = asyncio.run(main())
    assert answers.pop("good") == 200
    for name, (status, challenge, body) in answers.items():
        assert status == 401, (name, status, body)
        assert challenge.startswith("Bearer"), name
        assert json.loads(body)["error"] == "invalid_token"
        assert tokens["revoked"] not in body and token_id not in body


@pytest.mark.slow
def test_on_http_no_mcp_session_is_held_and_each_request_answers_for_its_token(
    ledger: str, tokens: dict[str, str]
) -> None:
    """Stateless: an initialize opens no session (no `mcp-session-id`), so one user opening many
    holds nothing that could shut another out (a server with sessions keeps 10,000 for all users),
    and a session id sent anyway, even one another user was given nowhere, names no one's data:
    Bob's request with it answers for Bob."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ada = {**headers, "Authorization": f"Bearer {tokens['ada']}"}
    bob = {**headers, "Authorization": f"Bearer {tokens['bob']}"}
    search = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "cross_session_search", "arguments": {"query": "Kyoto"}},
    }

    async def main() -> dict[str, Any]:
        async with http_server(ledger) as endpoint, httpx2.AsyncClient(timeout=60) as http:
            opened = [(await http.post(endpoint, headers=bob, json=initialize_request())) for _ in range(50)]
            held = {"mcp-session-id": "0" * 32, "mcp-protocol-version": "2025-06-18"}
            answers = {
                "ada opens": await http.post(endpoint, headers=ada, json=initialize_request()),
                "ada searches": await http.post(endpoint, headers={**ada, **held}, json=search),
                "bob searches": await http.post(endpoint, headers={**bob, **held}, json=search),
            }
            return {
                "session ids": [r.headers.get("mcp-session-id") for r in opened],
                "statuses": {r.status_code for r in opened},
                **{name: (response.status_code, response.text) for name, response in answers.items()},
            }

    answers = asyncio.run(main())
    assert answers["session ids"] == [None] * 50 and answers["statuses"] == {200}
    assert answers["ada opens"][0] == 200
    assert answers["ada searches"][0] == 200 and "cherry blossoms" in answers["ada searches"][1]
    assert answers["bob searches"][0] == 200 and "No results found." in answers["bob searches"][1]


@pytest.mark.slow
def test_on_http_a_token_revoked_mid_session_opens_nothing_more(ledger: str) -> None:
    """The token is checked on every request, not once per MCP session."""
    token = make_token(ledger, USER)

    async def main() -> tuple[str, str]:
        async with http_server(ledger) as endpoint, http_client(endpoint, token) as client:
            before = await text_of(client, "conversation_search", {"query": "kyoto", "session_id": "trip"})
            cli(ledger, "token", "revoke", token)
            with pytest.raises(MCPError) as refused:  # the SDK's spelling of an HTTP error status
                await client.call_tool("conversation_search", {"query": "kyoto", "session_id": "trip"})
            return before[1], refused.value.message

    before, refused = asyncio.run(main())
    assert "cherry blossoms" in before
    assert refused == "Server returned an error response"  # the 401 (the test above shows the status)


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
        (
            ["--http", "--user", USER],
            "error: --user goes with stdio: on --http each request's bearer token names the user",
        ),
        ([], "error: stdio needs --user (or serve --http, where bearer tokens name the user)"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(ledger: str, args: list[str], message: str) -> None:
    base = [sys.executable, "-m", "sessionledger", "mcp", "--database-url", ledger]
    if "--http" not in args and "--user" not in args and args:
        base += ["--user", USER]
    done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message + "\n")


@pytest.mark.parametrize("command", [["mcp", "--http"], ["serve"]])
def test_a_port_in_use_is_one_line_and_exit_2_before_any_banner(ledger: str, command: list[str]) -> None:
    """The socket is bound before the server says it serves (uvicorn said so after it, exit 3)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "sessionledger", *command, "--port", str(port), "--database-url", ledger],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


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
