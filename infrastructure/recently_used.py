"""`RecentlyUsed`: a bounded map that drops its least recently used entry first.

What the HTTP session API remembers between requests (a session found to be its user's, a token
that opened an append) are facts that do not change, kept so that a request need not read them
again; bounded, so that a client naming ever new sessions or tokens cannot grow the process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["RecentlyUsed"]

K = TypeVar("K")
V = TypeVar("V")


class RecentlyUsed(Generic[K, V]):
    """At most `size` entries; safe to share between threads (a lock held for a dict's step)."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The key's value (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, key: K) -> None:
        with self._lock:
            self._entries.pop(key, None)
