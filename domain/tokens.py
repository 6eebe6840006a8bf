"""The default token counter, found through an entry point so the domain never imports an adapter."""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points

from domain.ports import TokenCounter

ENTRY_POINT_GROUP = "sessionledger.token_counter"


@cache
def default_counter() -> TokenCounter:
    """The installed default counter (`sessionledger.token_counter` / `default`), loaded once."""
    found = entry_points(group=ENTRY_POINT_GROUP, name="default")
    if not found:
        raise RuntimeError(
            f"no token counter installed: entry point group {ENTRY_POINT_GROUP!r} has no 'default' "
            "(install the sessionledger package, e.g. `pip install -e .`)"
        )
    factory = next(iter(found)).load()
    return factory()
