"""ADK-TS on the ledger: sequential `appendEvent` through `sessionledger-adk`'s `LedgerSessionService`
(HTTP to a real `sessionledger serve` on PostgreSQL) against the same events through the Python
adapter in process (google-adk's `LedgerSessionService`, `infrastructure.adk`, on the same ledger)
and through ADK-TS's own `DatabaseSessionService` (`createPostgresSessionService`, a fresh database
on the same PostgreSQL server). One event per call through one session object, as a Runner
appends; no state delta. The node side (clients/typescript/bench/append.ts) alternates ours and
ADK-TS's rounds; the Python adapter's rounds run after it. Figures are medians of the rounds, with
their spread; the per-append time is what the TypeScript client waits (HTTP on loopback: routing,
token check, the conditional append and the answer). Target: at least ADK-TS's own SQL service's rate.
Needs Node.js and the package's dependencies (`npm ci` in clients/typescript).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from google.adk.events.event import Event
from google.genai import types
from sessionledger.domain.access import Grant, issue
from sessionledger.infrastructure.adk import LedgerSessionService
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.settings import Settings

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row

PACKAGE = Path(__file__).parents[1] / "clients" / "typescript"
ROUNDS, PER_ROUND = 8, 50
"""Per turn of the node side (3 turns each), and the Python adapter's rounds (3 x 8)."""


def run() -> list[Row]:
    subprocess.run(["npx", "tsc", "-p", "tsconfig.json"], cwd=PACKAGE, check=True)
    with fresh_postgres() as ledger_url, fresh_postgres() as peer_url:
        with open_storage(Settings(database_url=ledger_url)) as storage:
            token, stored = issue(Grant("bench", write=True), datetime.now(UTC))
            storage.access_tokens.add(stored)
        node = _node_side(ledger_url, peer_url, token)
        python = _python_side(ledger_url)
    return _rows(node["ledger"], node["adk"], python, node["latencies"])


def _node_side(ledger_url: str, peer_url: str, token: str) -> dict[str, list[float]]:
    port = _free_port()
    cli = Path(sys.executable).with_name("sessionledger")
    server = subprocess.Popen(
        [cli, "serve", "--port", str(port), "--database-url", ledger_url], stderr=subprocess.PIPE
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/api/v1/openapi.json", server)
        env = {
            **os.environ,
            "BASE_URL": base,
            "TOKEN": token,
            "PEER_PG_URL": peer_url,
            "ROUNDS": str(ROUNDS),
            "PER_ROUND": str(PER_ROUND),
            "TEXTS": json.dumps(_texts()),
        }
        out = subprocess.run(
            ["node", "dist/bench/append.js"], cwd=PACKAGE, env=env, check=True, capture_output=True, text=True
        )
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(30)


def _texts() -> list[str]:
    """The events' texts, the same on both sides: the first ShareGPT exchanges."""
    return [m.text or "" for m in payloads.cycled(4)]


def _python_side(ledger_url: str) -> list[float]:
    """Events/s per round through google-adk's `LedgerSessionService` on the same ledger."""

    async def rounds() -> list[float]:
        service = LedgerSessionService(ledger_url)
        try:
            session = await service.create_session(app_name="bench", user_id="bench-py")
            texts = _texts()
            rates = []
            for round_ in range(3 * ROUNDS + 1):  # the first warms up
                started = time.perf_counter()
                for n in range(PER_ROUND):
                    user = n % 2 == 0
                    await service.append_event(
                        session,
                        Event(
                            invocation_id=f"inv{n // 2}",
                            author="user" if user else "assistant",
                            content=types.Content(
                                role="user" if user else "model", parts=[types.Part(text=texts[n % 4])]
                            ),
                        ),
                    )
                if round_:
                    rates.append(PER_ROUND / (time.perf_counter() - started))
            return rates
        finally:
            await service.close()

    return asyncio.run(rounds())


def _rows(ours: list[float], adk: list[float], python: list[float], latencies: list[float]) -> list[Row]:
    def figure(rates: list[float]) -> str:
        return f"{report.rate(statistics.median(rates), 'events')} ({min(rates):,.0f}-{max(rates):,.0f})"

    mine, peer, adapter = (statistics.median(r) for r in (ours, adk, python))
    cuts = statistics.quantiles(latencies, n=100)
    return [
        Row(
            "ADK-TS appendEvent, sequential: sessionledger-adk over HTTP",
            figure(ours),
            f"ADK-TS DatabaseSessionService (PostgreSQL) {figure(adk)}",
            mine / peer,
            ">= 1x its rate",
            mine >= peer,
        ),
        Row(
            "  the same, against the Python adapter in process",
            figure(ours),
            f"google-adk LedgerSessionService {figure(python)}",
            mine / adapter,
            "report",
        ),
        Row(
            "  per append, as the TypeScript client waits (HTTP on loopback)",
            f"p50 {cuts[49]:.2f} ms, p99 {cuts[98]:.2f} ms",
            f"Python adapter's mean {1000 / adapter:.2f} ms",
            cuts[49] / (1000 / adapter),
            "report",
        ),
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"sessionledger serve exited: {server.stderr.read() if server.stderr else ''}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("sessionledger serve did not answer within 30 s")


if __name__ == "__main__":
    report.main(run)
