"""A read-only dict for the mapping fields of immutable domain values.

A `dict` subclass rather than `types.MappingProxyType` so that values stay JSON-serializable,
picklable and deep-copyable (adapters serialize them), while every mutating method refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn


class FrozenDict(dict[str, Any]):
    """A dict that cannot be changed after construction (shallow: values are not copied)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("this mapping is read-only")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]  # dict says unhashable; a frozen one is not
        # like a tuple: hashable when every value is
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[Any, Any]]]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


EMPTY: FrozenDict = FrozenDict()


def freeze(mapping: Mapping[str, Any] | None, name: str = "value") -> FrozenDict:
    """A read-only copy of `mapping` (`None` is the empty mapping); a FrozenDict is reused as is.

    Anything else (a list of pairs included) is a `ValueError` naming the argument `name`.
    """
    kind = type(mapping)
    if isinstance(mapping, FrozenDict):
        return mapping
    if kind is dict:
        return FrozenDict(mapping) if mapping else EMPTY
    if mapping is None:
        return EMPTY
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{name}: expected a mapping, got {type(mapping).__name__}")
    return FrozenDict(mapping) if mapping else EMPTY
