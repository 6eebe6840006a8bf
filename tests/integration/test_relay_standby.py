"""Two relays on one PostgreSQL ledger: the second says once, in its log, that it stands by because
another relay leads, and says so again when it takes over (a silent standby looks like a hung one)."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import create_app
from sessionledger.workers.relay import run_relay


def said(caplog: pytest.LogCaptureFixture, start: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "sessionledger.workers.relay" and r.getMessage().startswith(start)
    ]


def wait_until(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.postgres
def test_a_standby_relay_logs_once_that_another_leads_and_once_that_it_took_over(pg_url, caplog):
    settings = Settings(database_url=pg_url, broker_url="memory://localhost//", relay_interval=0.05)
    open_storage(settings).close()  # the schema, before both relays race to create it
    caplog.set_level(logging.INFO, logger="sessionledger.workers.relay")
    first_stop, second_stop = threading.Event(), threading.Event()
    first = threading.Thread(target=run_relay, args=(create_app(settings), first_stop))
    second = threading.Thread(target=run_relay, args=(create_app(settings), second_stop))
    try:
        first.start()
        wait_until(lambda: len(said(caplog, "relay leading")) == 1)
        second.start()
        wait_until(lambda: said(caplog, "relay standing by"))
        time.sleep(3)  # three more tries at the lease, none of them logged
        [standing_by] = said(caplog, "relay standing by")
        assert standing_by.levelno == logging.INFO
        assert "another relay leads" in standing_by.getMessage()
        assert [r.fields["took_over"] for r in said(caplog, "relay leading")] == [False]  # type: ignore[attr-defined]

        first_stop.set()
        first.join(30)
        wait_until(lambda: len(said(caplog, "relay leading")) == 2)
        assert [r.fields["took_over"] for r in said(caplog, "relay leading")] == [False, True]  # type: ignore[attr-defined]
        assert len(said(caplog, "relay standing by")) == 1
    finally:
        first_stop.set()
        second_stop.set()
        first.join(30)
        second.join(30)
