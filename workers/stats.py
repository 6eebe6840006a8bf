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
from sessionledger.workers.app import required_broker
from sessionledger.workers.metrics import prometheus_text, read_counters
from sessionledger.workers.relay import RELAY_NAME


@dataclass(frozen=True)
class Stats:
    counters: dict[str, int]
    queues: dict[str, int | None]
    """Messages waiting per queue; None when the broker could not be asked."""
    relay_lag: int
    """Ledger rows the relay has not handled yet."""

    def as_dict(self) -> dict[str, object]:
        return {"counters": self.counters, "queues": self.queues, "relay_lag": self.relay_lag}

    def prometheus(self) -> str:
        gauges: dict[str, int] = {}
        for queue, depth in self.queues.items():
            if depth is not None:
                gauges[f'queue_messages{{queue="{queue}"}}'] = depth
        gauges["relay_lag_rows"] = self.relay_lag
        return prometheus_text(self.counters, gauges)


def collect_stats(settings: Settings, storage: Storage) -> Stats:
    return Stats(
        read_counters(storage.counters),
        queue_depths(required_broker(settings), settings.queue_names),
        storage.relay_positions.lag(RELAY_NAME),
    )


def queue_depths(broker_url: str, names: QueueNames) -> dict[str, int | None]:
    """Messages ready in each queue of the deployment (a passive declare: nothing is created)."""
    depths: dict[str, int | None] = {queue.name: None for queue in names.all_queues()}
    try:
        with Connection(broker_url, connect_timeout=5) as connection:
            connection.ensure_connection(max_retries=0)
            for queue in names.all_queues():
                channel = connection.channel()
                try:
                    depths[queue.name] = queue(channel).queue_declare(passive=True).message_count
                except connection.channel_errors:
                    depths[queue.name] = 0  # not declared yet: nothing was ever sent to it
                finally:
                    channel.close()
    except (OSError, KombuError):
        pass  # the broker is down: depths stay unknown
    return depths
