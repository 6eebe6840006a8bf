"""Compaction costs, on PostgreSQL and ShareGPT text.

- trigger evaluation after each append, through the workers' own path (`Compactions.evaluate`:
  session, the app's policy, the window's running stats, `trigger.should_compact`) with the built-in
  default policy, for a 10-event against a 10,000-event session (whose token counts the evaluator
  filled once, as it does when the threshold comes within reach);
- token counting: the offline tiktoken counter against `len()` as the estimator, per message;
- a compaction without the LLM (`SessionService.compact`: read, plan, CAS write) of a
  1,000-event session with the recursive strategy and an instant summarizer; a raw SELECT of a
  1,000-event window is shown next to it for scale.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from typing import Any

import psycopg
from sessionledger.domain.compaction import CompactionResult, RecursiveSummarizationStrategy
from sessionledger.domain.ports import Ledger
from sessionledger.infrastructure import SessionService
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.policies import load_policies
from sessionledger.infrastructure.settings import DEFAULT_MODEL, Settings
from sessionledger.infrastructure.tokens import counter_for
from sessionledger.workers.runtime import WorkerRuntime

from bench import payloads, raw, report
from bench.database import fresh_postgres
from bench.report import Row
from bench.timing import alternating, interleaved, timed

SMALL_EVENTS, LARGE_EVENTS, EVALUATION_ROUNDS = 10, 10_000, 80
COUNTED_MESSAGES, COUNTING_ROUNDS = 2_000, 7
COMPACTED_EVENTS, COMPACTIONS = 1_000, 15


class InstantSummarizer:
    """The LLM call left out: a fixed summary, at once."""

    def summarize(self, system_prompt: str, user_prompt: str) -> str:
        return "The user and the assistant discussed several topics; nothing is pending."


def run() -> list[Row]:
    with fresh_postgres() as url, open_storage(Settings(database_url=url)) as storage:
        runtime = WorkerRuntime(
            storage.service.settings,
            storage=storage,
            policies=load_policies(InstantSummarizer),
        )
        return [*_trigger_evaluation(runtime), *_token_counting(), *_compaction(storage.service, url)]


def _trigger_evaluation(runtime: WorkerRuntime) -> list[Row]:
    service = runtime.service
    large = payloads.session_with(service, LARGE_EVENTS)
    service.fill_token_counts(large, runtime.token_counter)
    # a fresh small session per round, so every evaluation sees exactly SMALL_EVENTS events
    smalls = iter([payloads.session_with(service, SMALL_EVENTS - 1) for _ in range(EVALUATION_ROUNDS + 1)])
    appended = iter(payloads.cycled(2 * EVALUATION_ROUNDS + 2, pool=200))
    decisions: dict[str, set[str]] = {"small": set(), "large": set()}

    def after_append(name: str, session_id: str) -> float:
        service.append_message(session_id, next(appended))
        decision: list[str] = []
        seconds = timed(lambda: decision.append(runtime.compactions.evaluate(session_id)))
        decisions[name].add(decision[0])
        return seconds

    cases = {
        "small": lambda: after_append("small", next(smalls)),
        "large": lambda: after_append("large", large),
    }
    for case in cases.values():
        case()
    medians = alternating(EVALUATION_ROUNDS, cases)
    ratio = medians["large"] / medians["small"]
    said = {name: "/".join(sorted(found)) for name, found in decisions.items()}
    return [
        Row(
            f"trigger evaluation after an append, {LARGE_EVENTS:,} events ({said['large']})",
            report.duration(medians["large"]),
            f"{SMALL_EVENTS} events ({said['small']}) {report.duration(medians['small'])}",
            ratio,
            "<= 1.5x",
            ratio <= 1.5,
        )
    ]


def _token_counting() -> list[Row]:
    texts = [message.text or "" for message in payloads.messages(COUNTED_MESSAGES)]
    counter = counter_for(DEFAULT_MODEL)  # the offline tiktoken counter (vocabulary loaded here, untimed)
    tokens = sum(counter(text) for text in texts)
    medians = interleaved(
        COUNTING_ROUNDS,
        {"tiktoken": lambda: [counter(text) for text in texts], "len": lambda: [len(text) for text in texts]},
    )

    def throughput(name: str) -> str:
        seconds = medians[name]
        return f"{report.rate(tokens / seconds, 'tokens')} ({report.rate(len(texts) / seconds, 'msgs')})"

    return [
        Row(
            f"token counting, offline tiktoken ({counter.encoding.name}), ShareGPT messages",
            throughput("tiktoken"),
            f"len() {throughput('len')}",
            medians["len"] / medians["tiktoken"],
            "report (tokens: o200k count of the same text)",
        )
    ]


class TimedLedger:
    """A ledger that adds up the seconds spent in each of its methods (the read and the write of
    a compaction), so the rest of `SessionService.compact` is the plan."""

    def __init__(self, inner: Ledger) -> None:
        self._inner = inner
        self.seconds: dict[str, float] = defaultdict(float)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not callable(found):
            return found

        def timed_call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return found(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed_call


def _compaction(service: SessionService, url: str) -> list[Row]:
    reference = payloads.session_with(service, COMPACTED_EVENTS)
    sessions = [payloads.session_with(service, COMPACTED_EVENTS) for _ in range(COMPACTIONS + 1)]
    for session_id in sessions:  # as the evaluator does after appends, before any compaction
        service.fill_token_counts(session_id)
    targets = iter(sessions)
    ledger = TimedLedger(service.ledger)
    timed_service = SessionService(ledger, service.settings, service.token_counter)  # type: ignore[arg-type]
    policy = load_policies(InstantSummarizer).for_app("bench")
    assert policy is not None
    strategy = RecursiveSummarizationStrategy(InstantSummarizer(), max_events_to_keep=10, overlap_size=2)
    parts: dict[str, list[float]] = defaultdict(list)

    def compact() -> float:
        ledger.seconds.clear()
        result: list[CompactionResult] = []
        seconds = timed(lambda: result.append(timed_service.compact(next(targets), policy.trigger, strategy)))
        assert result[0].events_removed > 0, "the compaction archived nothing"
        read = ledger.seconds["get_session"] + ledger.seconds["window"]
        write = ledger.seconds["apply_compaction"]
        for name, value in (("read", read), ("write", write), ("plan", seconds - read - write)):
            parts[name].append(value)
        return seconds

    with psycopg.connect(url) as conn:
        cases = {"compact": compact, "raw": lambda: timed(lambda: raw.select_window(conn, reference))}
        for case in cases.values():
            case()
        parts.clear()
        medians = alternating(COMPACTIONS, cases)
    part = {name: report.duration(statistics.median(values)) for name, values in parts.items()}
    return [
        Row(
            f"compaction without the LLM (read, plan, CAS write), {COMPACTED_EVENTS:,} events",
            report.duration(medians["compact"]),
            f"raw SELECT of the window {report.duration(medians['raw'])}",
            medians["compact"] / medians["raw"],
            "< 20 ms (median)",
            medians["compact"] < 0.020,
        ),
        Row(
            "  of which: read / plan / write (token counts stored by the evaluator beforehand)",
            f"{part['read']} / {part['plan']} / {part['write']}",
        ),
    ]


if __name__ == "__main__":
    report.main(run)
