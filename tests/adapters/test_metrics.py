"""Counters add up across processes through their shared store; Prometheus text; JSON log lines."""

from __future__ import annotations

import json
import logging
import urllib.request

import pytest
import sqlalchemy as sa
from sessionledger.infrastructure.ledger.counters import MemoryCounterStore
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers import metrics
from sessionledger.workers.metrics import (
    JsonFormatter,
    Metrics,
    TextFormatter,
    describe_error,
    log_event,
    prometheus_text,
    read_counters,
    serve_prometheus,
)


def test_counters_of_several_processes_add_up_in_their_store_as_they_count():
    store = MemoryCounterStore()
    first, second = Metrics(lambda: store), Metrics(lambda: store)
    first.add(metrics.EVENTS_INGESTED, 100)
    first.add(metrics.DUPLICATES_SKIPPED, 3)
    second.add(metrics.EVENTS_INGESTED, 50)
    second.add(metrics.COMPACTIONS_RUN)
    assert read_counters(store)[metrics.EVENTS_INGESTED] == 150  # live: nothing waits for a flush
    first.add(metrics.EVENTS_INGESTED, 1)
    totals = read_counters(store)
    assert totals[metrics.EVENTS_INGESTED] == 151
    assert totals[metrics.DUPLICATES_SKIPPED] == 3 and totals[metrics.COMPACTIONS_RUN] == 1
    assert totals[metrics.DEAD_LETTERED] == 0
    assert first.totals()[metrics.EVENTS_INGESTED] == 101


def test_the_store_is_opened_only_to_add_something_and_what_it_refused_is_added_later():
    store, opened, failures = MemoryCounterStore(), [], [sa.exc.OperationalError("INSERT", {}, OSError())]

    class Flaky:
        def add(self, deltas):
            if failures:
                raise failures.pop()
            store.add(deltas)

    def open_store():
        opened.append(True)
        return Flaky()

    counted = Metrics(open_store)
    counted.flush()
    assert opened == []  # nothing to add: the store was never opened
    counted.add(metrics.EVENTS_INGESTED, 2)  # the store fails: the delta is kept
    assert read_counters(store)[metrics.EVENTS_INGESTED] == 0
    counted.add(metrics.EVENTS_INGESTED, 1)
    assert read_counters(store)[metrics.EVENTS_INGESTED] == 3


def test_prometheus_text_format():
    text = prometheus_text({metrics.EVENTS_INGESTED: 7}, {"dead_letter_queue_depth": 2})
    assert (
        "# TYPE sessionledger_events_ingested_total counter\nsessionledger_events_ingested_total 7\n" in text
    )
    assert "# HELP sessionledger_events_ingested_total Events stored" in text
    assert text.endswith(
        "# TYPE sessionledger_dead_letter_queue_depth gauge\nsessionledger_dead_letter_queue_depth 2\n"
    )


def test_metrics_are_served_over_http():
    server = serve_prometheus(0, lambda: prometheus_text({metrics.COMPACTIONS_RUN: 4}), host="127.0.0.1")
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert "sessionledger_compactions_run_total 4" in response.read().decode()
    finally:
        server.shutdown()


def test_log_lines_are_json_with_their_fields():
    record = logging.LogRecord(
        "sessionledger.workers.tasks", logging.INFO, __file__, 1, "compacted", None, None
    )
    record.fields = {"session_id": "s-1", "tokens_saved": 120}
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "compacted" and line["session_id"] == "s-1" and line["tokens_saved"] == 120
    assert (
        line["level"] == "info"
        and line["logger"] == "sessionledger.workers.tasks"
        and line["ts"].endswith("+00:00")
    )


def test_log_event_attaches_fields(caplog):
    with caplog.at_level(logging.INFO, logger="t"):
        log_event(logging.getLogger("t"), "ingested", stored=3)
    assert caplog.records[0].fields == {"stored": 3}


def test_no_log_line_shows_a_password_json_or_text():
    assert hide_passwords("cannot reach postgresql+psycopg://u:PW@h:notaport/db") == (
        "cannot reach postgresql+psycopg://u:***@h:notaport/db"
    )
    assert (
        hide_passwords("mysql://u:PW@h/db, then mysql://u:PW@h/db")
        == "mysql://u:***@h/db, then mysql://u:***@h/db"
    )
    assert hide_passwords("redis://:PW@h:6379/0 user@example.com") == "redis://:***@h:6379/0 user@example.com"
    error = ConnectionError("connection to amqp://guest:PW@broker:5672// refused")
    assert describe_error(error) == "ConnectionError: connection to amqp://guest:***@broker:5672// refused"
    record = logging.LogRecord("relay", logging.WARNING, __file__, 1, "round failed", None, None)
    record.fields = {"error": str(error), "wait": 0.5}
    assert "PW" not in JsonFormatter().format(record)
    text = TextFormatter().format(record)
    assert "PW" not in text and text.endswith(
        "round failed error=connection to amqp://guest:***@broker:5672// refused wait=0.5"
    )


@pytest.mark.parametrize(
    ("environment", "host"), [({}, "127.0.0.1"), ({"SESSIONLEDGER_METRICS_HOST": "0.0.0.0"}, "0.0.0.0")]
)
def test_the_relays_metrics_listen_on_loopback_unless_told(monkeypatch, environment, host):
    """`/metrics` takes no token and each request reads the database and the broker."""
    from sessionledger.workers.relay import _serve_metrics

    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    server = _serve_metrics(Settings(metrics_port=0), storage=None)  # type: ignore[arg-type]
    try:
        assert server.server_address[0] == host
    finally:
        server.shutdown()
