"""`in_utc`: an aware time as UTC, the one zone every backend stores and compares times in; a time
UTC has no room for is a `ValueError` naming it, not an `OverflowError` (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime


def in_utc(moment: datetime, name: str) -> datetime:
    """An aware `moment` in UTC (itself when it is already); `ValueError` naming it when UTC has no
    such time: the calendar's first or last day at an offset that crosses its edge
    (`0001-01-01T00:00:00+14:00`, `9999-12-31T23:59:59-14:00`), which `datetime` cannot convert and
    so no backend can store or compare."""
    if moment.tzinfo is UTC:
        return moment
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"{name} {moment.isoformat()} is out of range: in UTC it falls before year 1 or after year 9999"
        ) from None
