"""Whether a queue exists on the broker, and how many messages wait in it, asked without creating it.

Reading commands (`stats`, `dlq list`) leave the broker as they found it: a mistyped queue prefix
must read as queues that do not exist, not create them. RabbitMQ is asked with a passive declare,
on a channel of its own (a missing queue closes the channel it was asked on). On Redis a queue is
a list that exists only while it holds messages, so a declared but empty queue is known by its
binding in kombu's table of its exchange.
"""

from __future__ import annotations

from kombu import Connection, Queue


def queue_depth(connection: Connection, queue: Queue) -> int | None:
    """Messages ready in `queue`, or None when the broker holds no such queue."""
    channel = connection.channel()
    try:
        try:
            # kombu-stubs types the declare as the queue name; passive, it is the broker's declare-ok
            return int(queue(channel).queue_declare(passive=True).message_count)  # type: ignore[union-attr]
        except connection.channel_errors:
            return 0 if _declared_on_redis(connection, channel, queue) else None
    finally:
        channel.close()  # type: ignore[attr-defined]  # kombu-stubs' StdChannel omits close()


def _declared_on_redis(connection: Connection, channel: object, queue: Queue) -> bool:
    """An empty Redis queue: declared (bound to its exchange) with no list behind it."""
    if connection.transport.driver_type != "redis":
        return False
    table = channel.get_table(queue.exchange.name)  # type: ignore[attr-defined]  # Redis channels only
    return any(bound == queue.name for *_, bound in table)
