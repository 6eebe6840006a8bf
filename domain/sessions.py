"""`Session` metadata and the google-adk state scopes (docs/api.md "State scopes").

State keys `app:k` are shared by an app, `user:k` by a user within an app, `temp:k` are never
stored, and every other key belongs to the session. Storage keeps the three scopes apart (without
prefixes); readers see one merged mapping with the prefixes put back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, Final, NamedTuple

from sessionledger.domain.mappings import EMPTY, FrozenDict, freeze
from sessionledger.domain.times import in_utc

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


class DefaultTtl(Enum):
    """`create_session(ttl=...)` left out: the deployment's default time-to-live (the operator's
    `session_ttl` setting), which is "never" unless the operator set one; `ttl=None` is always never."""

    DEPLOYMENT = "the deployment's session_ttl"

    def __repr__(self) -> str:
        return "DEFAULT_TTL"


DEFAULT_TTL: Final = DefaultTtl.DEPLOYMENT


def _now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    return in_utc(value, name)


def check_ttl(ttl: timedelta | None, name: str = "ttl") -> timedelta | None:
    """`ttl` itself, or a `ValueError` unless it is a positive `timedelta` or `None` (never expires):
    a zero or negative time-to-live would make a session born expired, which the next sweep deletes."""
    if ttl is None:
        return None
    if not isinstance(ttl, timedelta):
        raise ValueError(f"{name} must be a timedelta or None")
    if ttl <= timedelta(0):
        seconds = ttl.total_seconds()
        raise ValueError(f"{name} must be positive (None: never expires), got {seconds:g} seconds")
    return ttl


def expiry(created_at: datetime, ttl: timedelta | None) -> datetime | None:
    """When a session created at `created_at` with time-to-live `ttl` expires (`None`: never).

    A `ttl` that is not positive (`check_ttl`), or that leaves the datetime range, is a `ValueError`.
    """
    ttl = check_ttl(ttl)
    if ttl is None:
        return None
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
    expires_at: datetime | None = None
    metadata: Mapping[str, Any] = EMPTY
    state: Mapping[str, Any] = EMPTY

    def __post_init__(self) -> None:
        for name in ("id", "user_id", "app_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must not be empty")
        created_at = _utc(self.created_at, "created_at")
        object.__setattr__(self, "created_at", created_at)
        if self.expires_at is not None:
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
