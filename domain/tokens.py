"""The default token counter, found through an entry point so the domain never imports an adapter."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points

from sessionledger.domain.ports import TokenCounter

ENTRY_POINT_GROUP = "sessionledger.token_counter"


def default_counter() -> TokenCounter:
    """The installed default counter (entry point `sessionledger.token_counter` / `default`).

    The entry point is looked up and imported once; the factory it names is asked each time,
    so it can follow its own configuration (the adapter's follows the configured model).
    """
    return _counter_factory()()


@cache
def _counter_factory() -> Callable[[], TokenCounter]:
    found = entry_points(group=ENTRY_POINT_GROUP, name="default")
    if not found:
        raise RuntimeError(
            f"no token counter installed: entry point group {ENTRY_POINT_GROUP!r} has no 'default' "
            "(install the sessionledger package, e.g. `pip install -e .`)"
        )
    return next(iter(found)).load()
