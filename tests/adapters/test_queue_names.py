"""Queue names: stable partitioning, prefixes, and the partition list syntax of `--partitions`."""

from __future__ import annotations

import zlib

import pytest
from sessionledger.infrastructure.queue_names import QueueNames, parse_partitions, partition_of


def test_partition_is_crc32_of_the_session_id_modulo_the_partition_count():
    assert partition_of("session-42", 8) == zlib.crc32(b"session-42") % 8
    assert {partition_of(f"s{i}", 4) for i in range(200)} == {0, 1, 2, 3}


def test_every_name_carries_the_prefix_and_ingest_queues_one_per_partition():
    names = QueueNames("run7", 3)
    assert [q.name for q in names.ingest_queues()] == ["run7.ingest.0", "run7.ingest.1", "run7.ingest.2"]
    assert (names.evaluate, names.compact, names.dead) == ("run7.evaluate", "run7.compact", "run7.dead")
    assert names.ingest_for("abc") == f"run7.ingest.{partition_of('abc', 3)}"
    assert all(q.name.startswith("run7.") for q in names.all_queues())


def test_work_queues_dead_letter_to_the_dead_queue_and_ingest_has_a_single_active_consumer():
    names = QueueNames("p", 2)
    ingest = names.ingest_queue(1)
    assert ingest.queue_arguments["x-dead-letter-exchange"] == "p.dead"
    assert ingest.queue_arguments["x-single-active-consumer"] is True
    assert "x-single-active-consumer" not in names.compact_queue.queue_arguments
    assert names.dead_queue.queue_arguments is None


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("", [0, 1, 2, 3, 4, 5, 6, 7]),
        ("all", list(range(8))),
        ("3", [3]),
        ("0-2,6", [0, 1, 2, 6]),
        ("5,1-2", [1, 2, 5]),
    ],
)
def test_partition_lists(spec, expected):
    assert parse_partitions(spec, 8) == expected


@pytest.mark.parametrize("spec", ["8", "2-9", "a", "3-1", "-1"])
def test_bad_partition_lists_are_value_errors(spec):
    with pytest.raises(ValueError):
        parse_partitions(spec, 8)


def test_bad_names_are_value_errors():
    with pytest.raises(ValueError):
        QueueNames("", 4)
    with pytest.raises(ValueError):
        QueueNames("a b", 4)
    with pytest.raises(ValueError):
        QueueNames("ok", 0)
