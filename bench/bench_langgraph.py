"""`LedgerSaver` on PostgreSQL against langgraph's own `PostgresSaver` / `AsyncPostgresSaver`
(langgraph-checkpoint-postgres) on the same server, in one run:

- `put` of a checkpoint with new channel values, one after the other on one thread (each the
  parent of the next), synchronous and asynchronous;
- `get_tuple` of the latest checkpoint of a thread with 100 checkpoints (each with a pending
  write), and `list` of those 100;
- a compiled two-node graph (`MessagesState`: a model node, then a reviewer node) invoked on a
  thread with 50 earlier turns: the checkpointer's share of the step, the invoke's time less the
  same invoke's with langgraph's `InMemorySaver` (the graph's own work), over the invoke's time.
Cases alternate round by round; figures are medians (a read's, of rounds of ten reads each: one
read of a quarter of a millisecond is timed as much as the machine's noise).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import START, MessagesState, StateGraph
from sessionledger.infrastructure.langgraph import LedgerSaver

from bench import payloads, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating, interleaved

PUT_ROUNDS, PUTS_PER_ROUND = 21, 50
HISTORY, READ_ROUNDS, READS_PER_ROUND = 100, 30, 10
TURNS, INVOKE_ROUNDS = 50, 15


def run() -> list[Row]:
    with fresh_postgres() as url:
        ledger_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
        with PostgresSaver.from_conn_string(url) as peer, LedgerSaver(ledger_url) as ours:
            peer.setup()
            rows = [*_puts(ours, peer), *_reads(ours, peer), *_invokes(ours, peer)]
        return rows + asyncio.run(_async_puts(url, ledger_url))


def _texts() -> Iterator[str]:
    while True:
        for message in payloads.cycled(1_000):
            yield message.text or ""


def _checkpoints(texts: Iterator[str]) -> Callable[[], tuple[dict[str, Any], dict[str, Any]]]:
    """Each call: the next checkpoint (two channels, both with new values and versions), and its
    new versions."""
    step = iter(range(1, 10**9))

    def make() -> tuple[dict[str, Any], dict[str, Any]]:
        n = next(step)
        checkpoint: dict[str, Any] = empty_checkpoint()
        versions = {"note": f"{n:032}.0", "count": f"{n:032}.0"}
        checkpoint["channel_values"] = {"note": next(texts), "count": n}
        checkpoint["channel_versions"] = versions
        return checkpoint, versions

    return make


def _putting(saver: BaseCheckpointSaver[Any]) -> Callable[[], float]:
    """A round of `PUTS_PER_ROUND` puts on one thread of `saver`, each the parent of the next."""
    config: dict[str, Any] = {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex}", "checkpoint_ns": ""}}
    make = _checkpoints(_texts())

    def put_round() -> float:
        nonlocal config
        batch = [make() for _ in range(PUTS_PER_ROUND)]
        started = time.perf_counter()
        for checkpoint, versions in batch:
            config = saver.put(config, checkpoint, {"source": "loop", "step": 1}, versions)
        return time.perf_counter() - started

    return put_round


def _puts(ours: LedgerSaver, peer: PostgresSaver) -> list[Row]:
    cases = {"ours": _putting(ours), "peer": _putting(peer)}
    for case in cases.values():  # warm up: connections, prepared statements, the thread
        case()
    medians = alternating(PUT_ROUNDS, cases)
    rates = {name: PUTS_PER_ROUND / seconds for name, seconds in medians.items()}
    ratio = rates["ours"] / rates["peer"]
    return [
        Row(
            "LedgerSaver.put, new channel values, sequential",
            report.rate(rates["ours"], "puts"),
            f"PostgresSaver {report.rate(rates['peer'], 'puts')}",
            ratio,
            ">= 1.0x",
            ratio >= 1.0,
        )
    ]


async def _async_puts(url: str, ledger_url: str) -> list[Row]:
    async with AsyncPostgresSaver.from_conn_string(url) as peer, LedgerSaver(ledger_url) as ours:
        await peer.setup()

        def putting(saver: BaseCheckpointSaver[Any]) -> Callable[[], Any]:
            config: dict[str, Any] = {
                "configurable": {"thread_id": f"bench-{uuid.uuid4().hex}", "checkpoint_ns": ""}
            }
            make = _checkpoints(_texts())

            async def put_round() -> float:
                nonlocal config
                batch = [make() for _ in range(PUTS_PER_ROUND)]
                started = time.perf_counter()
                for checkpoint, versions in batch:
                    config = await saver.aput(config, checkpoint, {"source": "loop", "step": 1}, versions)
                return time.perf_counter() - started

            return put_round

        cases = {"ours": putting(ours), "peer": putting(peer)}
        for case in cases.values():
            await case()
        samples: dict[str, list[float]] = {name: [] for name in cases}
        order = list(cases)
        for _ in range(PUT_ROUNDS):
            for name in order:
                samples[name].append(await cases[name]())
            order.reverse()
    medians = {name: sorted(values)[len(values) // 2] for name, values in samples.items()}
    rates = {name: PUTS_PER_ROUND / seconds for name, seconds in medians.items()}
    ratio = rates["ours"] / rates["peer"]
    return [
        Row(
            "LedgerSaver.aput, new channel values, sequential",
            report.rate(rates["ours"], "puts"),
            f"AsyncPostgresSaver {report.rate(rates['peer'], 'puts')}",
            ratio,
            ">= 1.0x",
            ratio >= 1.0,
        )
    ]


def _thread(saver: BaseCheckpointSaver[Any]) -> dict[str, Any]:
    """A thread of `HISTORY` checkpoints, each with a pending write; its config."""
    config: dict[str, Any] = {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex}", "checkpoint_ns": ""}}
    make = _checkpoints(_texts())
    for step in range(HISTORY):
        checkpoint, versions = make()
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, versions)
        saver.put_writes(config, [("note", f"write {step}")], f"task-{step}")
    return {"configurable": {"thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ""}}


def _reads(ours: LedgerSaver, peer: PostgresSaver) -> list[Row]:
    threads = {"ours": (ours, _thread(ours)), "peer": (peer, _thread(peer))}
    for saver, config in threads.values():
        latest = saver.get_tuple(config)
        assert (
            latest is not None
            and latest.metadata["step"] == HISTORY - 1
            and len(latest.pending_writes or []) == 1
        )
        assert len(list(saver.list(config))) == HISTORY
    rows = []
    for what, call in (
        ("get_tuple, latest of 100 checkpoints", lambda s, c: s.get_tuple(c)),
        ("list of 100 checkpoints", lambda s, c: list(s.list(c))),
    ):
        batches = interleaved(
            READ_ROUNDS,
            {
                name: (lambda s=s, c=c, f=call: [f(s, c) for _ in range(READS_PER_ROUND)])
                for name, (s, c) in threads.items()
            },
        )
        medians = {name: seconds / READS_PER_ROUND for name, seconds in batches.items()}
        ratio = medians["ours"] / medians["peer"]
        rows.append(
            Row(
                f"LedgerSaver.{what}",
                report.duration(medians["ours"]),
                f"PostgresSaver {report.duration(medians['peer'])}",
                ratio,
                "<= 1x peer time",
                ratio <= 1,
            )
        )
    return rows


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    """The two-node graph: a model that answers with its question's length, then a reviewer."""

    def model(state: MessagesState) -> dict[str, Any]:
        question = str(state["messages"][-1].content)
        return {"messages": [AIMessage(f"{question[:200]} ({len(question)} characters)")]}

    def reviewer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("reviewed")]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("reviewer", reviewer)
    graph.add_edge(START, "model")
    graph.add_edge("model", "reviewer")
    return graph.compile(checkpointer=saver)


def _invokes(ours: LedgerSaver, peer: PostgresSaver) -> list[Row]:
    texts = _texts()
    graphs = {"ours": _graph(ours), "peer": _graph(peer), "memory": _graph(InMemorySaver())}
    configs = {name: {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex}"}} for name in graphs}
    for _ in range(TURNS):  # the earlier turns, the same on every thread
        question = next(texts)
        for name, graph in graphs.items():
            graph.invoke({"messages": [HumanMessage(question)]}, configs[name])
    questions = [next(texts) for _ in range(INVOKE_ROUNDS + 1)]
    asked = dict.fromkeys(graphs, 0)

    def invoking(name: str) -> Callable[[], None]:
        def invoke() -> None:
            graphs[name].invoke({"messages": [HumanMessage(questions[asked[name]])]}, configs[name])
            asked[name] += 1

        return invoke

    for name in graphs:
        invoking(name)()  # warm up
    medians = interleaved(INVOKE_ROUNDS, {name: invoking(name) for name in graphs})
    share = {name: (medians[name] - medians["memory"]) / medians[name] for name in ("ours", "peer")}
    ratio = share["ours"] / share["peer"]
    return [
        Row(
            f"two-node graph invoke, {TURNS} earlier turns: the checkpointer's share",
            f"{share['ours']:.0%} of {report.duration(medians['ours'])}",
            f"PostgresSaver {share['peer']:.0%} of {report.duration(medians['peer'])}",
            ratio,
            "<= 1x peer share",
            ratio <= 1,
        )
    ]


if __name__ == "__main__":
    report.main(run)
