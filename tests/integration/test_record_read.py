"""The whole-session record read (`infrastructure/ledger/records.py`), which verify, replay, export
and rewind use: every record once, in position order, across chunk boundaries, and only the
session's own, while another session's records interleave with it in the table."""

from __future__ import annotations

import pytest
from sessionledger.domain import UserMessage
from sessionledger.domain.chain import chain_problems
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.ledger import records

from tests.conftest import SQL_BACKENDS, sql_url


@pytest.fixture(params=SQL_BACKENDS)
def ledger_url(request) -> str:
    return sql_url(request, request.param)


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 100])
def test_every_record_once_in_order_across_chunks(ledger_url: str, chunk: int, monkeypatch) -> None:
    monkeypatch.setattr(records, "CHUNK", chunk)  # 12 records: exact multiples of 1, 3 and 4
    with open_service(ledger_url) as service:
        mine, other = service.create_session("alice").id, service.create_session("bob").id
        for i in range(11):
            service.append_message(mine, UserMessage(f"mine {i}"))
            service.append_message(other, UserMessage(f"other {i}"))
        read = list(service.records(mine))
        assert [r.position for r in read] == list(range(1, 13))
        assert {r.session_id for r in read} == {mine}
        assert [r.event().message.text for r in read if r.kind is Kind.EVENT] == [
            f"mine {i}" for i in range(11)
        ]
        assert chain_problems(read) == []
        assert verify(service, mine).ok


def test_a_gap_is_stepped_over_not_read_through(sqlite_url: str, monkeypatch) -> None:
    """Chunks are ranges of positions: records missing for longer than a chunk, or a position moved
    far past the end (a tampered ledger), cost a lookup, and every record left is read once."""
    monkeypatch.setattr(records, "CHUNK", 3)
    with open_service(sqlite_url) as service:
        mine = service.create_session("alice").id
        for i in range(11):
            service.append_message(mine, UserMessage(f"mine {i}"))
        with service.ledger.engine.begin() as conn:  # SQLite has no guard trigger
            conn.exec_driver_sql(
                "DELETE FROM ledger WHERE session_id = ? AND position BETWEEN 4 AND 10", (mine,)
            )
            conn.exec_driver_sql(
                "UPDATE ledger SET position = ? WHERE session_id = ? AND position = 12", (10**15, mine)
            )
        assert [r.position for r in service.records(mine)] == [1, 2, 3, 11, 10**15]
        assert verify(service, mine).first is not None
