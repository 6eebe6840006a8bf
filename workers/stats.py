"""What an operator sees: `sessionledger stats` and the relay's `/metrics`.

Counters come from the deployment's counter store (every worker process adds to them), queue
depths from the broker, and the relay's lag from its stored position against the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

from kombu import Connection
from kombu.exceptions import KombuError
from sessionledger.infrastructure.bootstrap import Storage
from sessionledger.infrastructure.queue_names import QueueNames
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import REDIS_ORDER_CAVEAT, on_redis, required_broker
from sessionledger.workers.broker_queues import queue_depth
from sessionledger.workers.metrics import prometheus_text, read_counters
from sessionledger.workers.relay import RELAY_NAME


@dataclass(frozen=True)
class Stats:
    counters: dict[str, int]
    queues: dict[str, int | None]
    """Messages waiting per queue; None for a queue the broker does not hold."""
    relay_lag: int
    """Ledger rows the relay has not handled yet."""
    broker_answered: bool = True
    """False when the broker could not be asked: no queue depth is known."""
    caveat: str | None = None
    """What the deployment's broker does not guarantee (Redis: per-session order across a crash)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "counters": self.counters,
            "queues": {
                name: {"exists": depth is not None, "messages": depth}
                if self.broker_answered
                else {"exists": None, "messages": None}
                for name, depth in self.queues.items()
            },
            "relay_lag": self.relay_lag,
            "caveat": self.caveat,
        }

    def prometheus(self) -> str:
        gauges: dict[str, int] = {}
        for queue, depth in self.queues.items():
            if depth is not None:
                gauges[f'queue_messages{{queue="{queue}"}}'] = depth
        gauges["relay_lag_rows"] = self.relay_lag
        return prometheus_text(self.counters, gauges)


def collect_stats(settings: Settings, storage: Storage) -> Stats:
    depths = queue_depths(required_broker(settings), settings.queue_names)
    return Stats(
        read_counters(storage.counters),
        depths or dict.fromkeys((queue.name for queue in settings.queue_names.all_queues()), None),
        storage.relay_positions.lag(RELAY_NAME),
        broker_answered=depths is not None,
        caveat=REDIS_ORDER_CAVEAT if on_redis(settings) else None,
    )


def queue_depths(broker_url: str, names: QueueNames) -> dict[str, int | None] | None:
    """Messages ready in each queue of the deployment, None for a queue the broker does not hold
    (asked without creating anything); None when the broker could not be asked."""
    try:
        with Connection(broker_url, connect_timeout=5) as connection:
            connection.ensure_connection(max_retries=0)
            return {queue.name: queue_depth(connection, queue) for queue in names.all_queues()}
    except (OSError, KombuError):
        return None  # the broker is down: depths stay unknown
