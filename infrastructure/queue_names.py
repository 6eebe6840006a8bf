"""Broker names and declarations shared by the publisher and the workers.

Both sides declare the same exchange and queues with the same arguments (RabbitMQ refuses a
redeclaration with different ones), so they are built in one place. Every name starts with a
configurable prefix: a deployment, or a test run, sees only its own messages.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kombu is imported by the declarations, not with the names the settings need
    from kombu import Exchange, Queue

DEFAULT_PREFIX = "sessionledger"
DEFAULT_PARTITIONS = 2
QUEUE_TYPES = ("classic", "quorum")
"""RabbitMQ's queue types the deployment may use: classic (one node's), or quorum (replicated over
a cluster's nodes by Raft, surviving the loss of a minority of them)."""

INGEST_TASK = "sessionledger.ingest"
EVALUATE_TASK = "sessionledger.evaluate"
COMPACT_TASK = "sessionledger.compact"
SWEEP_TASK = "sessionledger.sweep"


def partition_of(session_id: str, partitions: int) -> int:
    """The ingest partition of a session: every event of a session goes through one queue, in order."""
    return zlib.crc32(session_id.encode()) % partitions


def parse_partitions(spec: str, partitions: int) -> list[int]:
    """`"0-3,6"` -> `[0, 1, 2, 3, 6]`; `""` or `"all"` -> every partition. `ValueError` when out of range."""
    if spec.strip() in ("", "all"):
        return list(range(partitions))
    chosen: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last or first)
        except ValueError:
            raise ValueError(f"bad partition list {spec!r}: expected e.g. '0-3,6'") from None
        if not 0 <= low <= high < partitions:
            raise ValueError(f"partition range {part!r} is outside 0..{partitions - 1}")
        chosen.update(range(low, high + 1))
    return sorted(chosen)


@dataclass(frozen=True)
class QueueNames:
    """The exchange, queues and routing keys of one deployment (one prefix, one partition count,
    one queue type)."""

    prefix: str = DEFAULT_PREFIX
    partitions: int = DEFAULT_PARTITIONS
    queue_type: str = "classic"

    def __post_init__(self) -> None:
        if not self.prefix or any(c.isspace() for c in self.prefix):
            raise ValueError(f"queue prefix must be a non-empty word, got {self.prefix!r}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be at least 1, got {self.partitions}")
        if self.queue_type not in QUEUE_TYPES:
            raise ValueError(f"queue type must be classic or quorum, got {self.queue_type!r}")

    # names
    def ingest(self, partition: int) -> str:
        return f"{self.prefix}.ingest.{partition}"

    def ingest_for(self, session_id: str) -> str:
        return self.ingest(partition_of(session_id, self.partitions))

    @property
    def evaluate(self) -> str:
        return f"{self.prefix}.evaluate"

    @property
    def compact(self) -> str:
        return f"{self.prefix}.compact"

    @property
    def dead(self) -> str:
        return f"{self.prefix}.dead"

    # kombu declarations (routing key = queue name on a direct exchange)
    @cached_property
    def exchange(self) -> Exchange:
        from kombu import Exchange

        return Exchange(self.prefix, type="direct", durable=True)

    @cached_property
    def dead_exchange(self) -> Exchange:
        from kombu import Exchange

        return Exchange(self.dead, type="direct", durable=True)

    @property
    def _type_arguments(self) -> dict[str, object]:
        """The queue type's declaration argument (none for classic, RabbitMQ's default: queues
        declared before there was a choice keep matching)."""
        return {"x-queue-type": "quorum"} if self.queue_type == "quorum" else {}

    def _queue(self, name: str, **arguments: object) -> Queue:
        """A durable queue whose rejected messages go to the dead-letter queue (RabbitMQ's DLX).

        Other transports ignore the `x-` arguments; the workers dead-letter explicitly there.
        """
        from kombu import Queue

        arguments = {
            "x-dead-letter-exchange": self.dead,
            "x-dead-letter-routing-key": self.dead,
            **self._type_arguments,
            **arguments,
        }
        return Queue(name, self.exchange, routing_key=name, durable=True, queue_arguments=arguments)

    def ingest_queue(self, partition: int) -> Queue:
        """One ingest partition; a single active consumer keeps its sessions in order on RabbitMQ,
        however many workers (on however many hosts) consume it: the others wait as standbys, and
        the broker hands the partition, unacked messages first, to one of them when it goes."""
        return self._queue(self.ingest(partition), **{"x-single-active-consumer": True})

    def ingest_queues(self, partitions: list[int] | None = None) -> list[Queue]:
        chosen = range(self.partitions) if partitions is None else partitions
        return [self.ingest_queue(p) for p in chosen]

    @cached_property
    def evaluate_queue(self) -> Queue:
        return self._queue(self.evaluate)

    @cached_property
    def compact_queue(self) -> Queue:
        return self._queue(self.compact)

    @cached_property
    def dead_queue(self) -> Queue:
        from kombu import Queue

        return Queue(
            self.dead,
            self.dead_exchange,
            routing_key=self.dead,
            durable=True,
            queue_arguments=self._type_arguments or None,
        )

    def all_queues(self) -> list[Queue]:
        return [*self.ingest_queues(), self.evaluate_queue, self.compact_queue, self.dead_queue]
