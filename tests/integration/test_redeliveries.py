"""The redelivery count of ingest batches (`workers.redeliveries`) on both SQL backends."""

from __future__ import annotations

import pytest
from sessionledger.infrastructure import open_service
from sessionledger.workers.redeliveries import Redeliveries


@pytest.fixture(params=["sqlite", "postgres"])
def counter(request) -> Redeliveries:
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    with open_service(url) as service:  # creates the schema
        yield Redeliveries(service.ledger.engine)


def test_counts_each_redelivery_of_a_message_until_it_is_forgotten(counter: Redeliveries) -> None:
    assert [counter.count("batch-1"), counter.count("batch-1"), counter.count("batch-2")] == [1, 2, 1]
    counter.forget("batch-1")
    counter.forget("never-counted")  # nothing to forget is fine
    assert [counter.count("batch-1"), counter.count("batch-2")] == [1, 2]
