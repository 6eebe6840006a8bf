"""What a forked process must not inherit from its parent: `forget_in_children(owner, forget)` has
`forget(owner)` called in every process forked from this one, right after the fork (while the
owner lives).

Why: a process forked after a service was used (gunicorn's `--preload`, a `multiprocessing` pool,
Celery's prefork workers) inherits its pools' connections, which are the parent's sockets, and its
threads' state, but not the threads. On a connection both used, each read the other's answers (the
parent's next call failed: "server closed the connection unexpectedly"); a call handed to a pool
whose threads stayed in the parent waited for ever, and so did compaction in the background. Each
owner forgets what is the parent's, without closing it (closing would end the parent's connections
too), and starts afresh in the child.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["forget_in_children"]

T = TypeVar("T")

log = logging.getLogger(__name__)

_forgets: weakref.WeakKeyDictionary[Any, Callable[[Any], None]] = weakref.WeakKeyDictionary()


def forget_in_children(owner: T, forget: Callable[[T], None]) -> None:
    """Call `forget(owner)` in each forked child, as long as `owner` lives here (`forget` must not
    hold `owner` itself, or it never dies)."""
    _forgets[owner] = forget


def _after_fork_in_child() -> None:
    """Each owner's `forget`, whatever another's raised (a hook's error is only printed by Python,
    and it would stop the hooks after it)."""
    for owner, forget in list(_forgets.items()):
        try:
            forget(owner)
        except Exception:
            log.exception("forgetting the parent's %r in a forked child failed", owner)


os.register_at_fork(after_in_child=_after_fork_in_child)
