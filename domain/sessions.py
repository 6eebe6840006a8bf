"""`Session` metadata and the google-adk state scopes (docs/api.md "State scopes").

State keys `app:k` are shared by an app, `user:k` by a user within an app, `temp:k` are never
stored, and every other key belongs to the session. Storage keeps the three scopes apart (without
prefixes); readers see one merged mapping with the prefixes put back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sessionledger.domain.mappings import EMPTY, FrozenDict, freeze
from sessionledger.domain.times import in_utc

DEFAULT_TTL = timedelta(days=60)
APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


class _DefaultExpiry:
    """Marks `expires_at` as "not given" (distinct from `None`, which means never)."""

    def __repr__(self) -> str:
        return "<created_at + 60 days>"


_DEFAULT_EXPIRY: Any = _DefaultExpiry()


def _now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    return in_utc(value, name)


def expiry(created_at: datetime, ttl: timedelta | None) -> datetime | None:
    """When a session created at `created_at` with time-to-live `ttl` expires (`None`: never).

    A negative `ttl` is a session born expired; one that leaves the datetime range is a `ValueError`.
    """
    if ttl is None:
        return None
    if not isinstance(ttl, timedelta):
        raise ValueError("ttl must be a timedelta or None")
    try:
        return created_at + ttl
    except OverflowError:
        raise ValueError(f"ttl {ttl} is out of range: created_at + ttl is not a datetime") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A session's metadata (no events); `state` is the merged view of the three scopes."""

    id: str
    user_id: str
    app_name: str = "default"
    created_at: datetime = field(default_factory=_now)
    expires_at: datetime | None = _DEFAULT_EXPIRY
    metadata: Mapping[str, Any] = EMPTY
    state: Mapping[str, Any] = EMPTY

    def __post_init__(self) -> None:
        for name in ("id", "user_id", "app_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must not be empty")
        created_at = _utc(self.created_at, "created_at")
        object.__setattr__(self, "created_at", created_at)
        if self.expires_at is _DEFAULT_EXPIRY:
            object.__setattr__(self, "expires_at", created_at + DEFAULT_TTL)
        elif self.expires_at is not None:
            object.__setattr__(self, "expires_at", _utc(self.expires_at, "expires_at"))
        object.__setattr__(self, "metadata", freeze(self.metadata, "metadata"))
        object.__setattr__(self, "state", freeze(self.state, "state"))

    def __hash__(self) -> int:
        return hash(self.id)


class StateDelta(NamedTuple):
    """A state delta split by scope; `app` and `user` keys have their prefix stripped."""

    app: dict[str, Any]
    user: dict[str, Any]
    session: dict[str, Any]


def _check_keys(delta: Mapping[str, Any]) -> None:
    for key in delta:
        if not isinstance(key, str):
            raise ValueError(f"state keys must be strings, got {key!r}")


def split_state_delta(delta: Mapping[str, Any] | None) -> StateDelta:
    """Route each key of `delta` to its scope; `temp:` keys are dropped."""
    split = StateDelta({}, {}, {})
    if not delta:
        return split
    _check_keys(delta)
    for key, value in delta.items():
        if key.startswith(APP_PREFIX):
            split.app[key[len(APP_PREFIX) :]] = value
        elif key.startswith(USER_PREFIX):
            split.user[key[len(USER_PREFIX) :]] = value
        elif not key.startswith(TEMP_PREFIX):
            split.session[key] = value
    return split


def merge_state(
    session_state: Mapping[str, Any], app_state: Mapping[str, Any], user_state: Mapping[str, Any]
) -> FrozenDict:
    """The merged read view: session keys, then `app:` keys, then `user:` keys (prefixes restored)."""
    merged = dict(session_state)
    merged.update((APP_PREFIX + key, value) for key, value in app_state.items())
    merged.update((USER_PREFIX + key, value) for key, value in user_state.items())
    return FrozenDict(merged)


def holds_temp(delta: Mapping[str, Any]) -> bool:
    """Whether `delta` has `temp:` keys, which `strip_temp` drops before an event is stored."""
    return bool(delta) and any(key.startswith(TEMP_PREFIX) for key in delta)


def strip_temp(delta: Mapping[str, Any] | None) -> dict[str, Any]:
    """`delta` without its `temp:` keys: what an event's stored `state_delta` keeps."""
    if not delta:
        return {}
    _check_keys(delta)
    return {key: value for key, value in delta.items() if not key.startswith(TEMP_PREFIX)}
