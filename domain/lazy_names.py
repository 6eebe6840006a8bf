"""A package's names imported on first use: one `__getattr__` and `__dir__` for every package that
keeps its import cheap (the command line's `--help` loads none of the database or queue stack)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`package`'s module `__getattr__` and `__dir__`: a name in `homes` is imported from the module
    `homes[name]` on first use and kept in the package, so later lookups are plain attribute reads;
    any other name is an `AttributeError` as usual. `public` is what `dir()` lists (`__all__`)."""
    listed = sorted(public)

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(homes[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return list(listed)

    return __getattr__, __dir__
