"""LangGraph's published checkpointer conformance suite (`langgraph-checkpoint-conformance`,
`validate()`) against `LedgerSaver` on memory, SQLite and PostgreSQL: every base and every
extended capability detected and passed, 8 of 8."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from sessionledger.infrastructure.langgraph import LedgerSaver


def test_every_capability_passes(database_url: str) -> None:
    @checkpointer_test(name=f"LedgerSaver[{database_url.split(':')[0]}]")
    async def ledger_saver() -> AsyncIterator[LedgerSaver]:
        async with LedgerSaver(database_url) as saver:
            yield saver

    report = asyncio.run(validate(ledger_saver))
    report.print_report()
    failures = {name: result.failures for name, result in report.results.items() if not result.passed}
    assert failures == {}
    assert {name for name, result in report.results.items() if result.detected and result.passed} == {
        capability.value for capability in ALL_CAPABILITIES
    }
    assert report.passed_all()
