"""`fast_constructor`: the one way the domain builds its frozen slotted values on hot paths.

A frozen dataclass's own constructor sets each field through `object.__setattr__` (its frozen
guard forbids plain stores), which costs several times a plain slot store. The append and read
paths build a message, an event, a draft or a record for every event they touch (a verify:
millions), so those classes are also built the fast way: each field stored on a *writable twin*
(a plain class with the same `__slots__`), which is then relabelled as the frozen class. The
result is an ordinary instance of it, frozen like any other; no check or `__post_init__` runs,
so only values known to be valid (read back from the ledger, or checked by the caller) go in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def fast_constructor(cls: type[T], fields: Sequence[str]) -> Callable[..., T]:
    """A function that takes the values of `cls`'s fields, positionally in the order `fields`
    names them, and returns the instance of `cls` holding them, built on a writable twin.

    `TypeError` unless `cls` keeps all its state in its own `__slots__` (no `__dict__`, no
    slotted base) and `fields` names each of those slots once. The function's body is written
    out (as `dataclasses` writes `__init__`): one attribute store per field, no loop.
    """
    slots = cls.__dict__.get("__slots__")
    if slots is None or cls.__bases__ != (object,):
        raise TypeError(f"{cls.__name__} must be a slotted class whose only base is object")
    slots = (slots,) if isinstance(slots, str) else tuple(slots)
    if sorted(fields) != sorted(slots) or len(set(fields)) != len(fields):
        raise TypeError(f"fields must name each slot of {cls.__name__} once: {slots}, got {tuple(fields)}")
    if {"_Twin", "_Frozen"} & set(fields):
        raise TypeError("a field may not be named _Twin or _Frozen (the builder's own names)")
    twin = type(f"_Writable{cls.__name__}", (), {"__slots__": slots})
    stores = "".join(f"    obj.{name} = {name}\n" for name in fields)
    source = (
        f"def build({', '.join(fields)}):\n"
        f"    obj = _Twin()\n{stores}"
        "    obj.__class__ = _Frozen  # safe: both classes have the one slot layout, on object\n"
        "    return obj\n"
    )
    namespace: dict[str, Any] = {"_Twin": twin, "_Frozen": cls}
    exec(source, namespace)  # the source above, built from slot names only
    build: Callable[..., T] = namespace["build"]
    build.__qualname__ = f"fast_constructor({cls.__name__})"
    return build
