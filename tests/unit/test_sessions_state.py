"""Session metadata and the google-adk state scopes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time
from sessionledger.domain import Session
from sessionledger.domain.sessions import (
    APP_PREFIX,
    TEMP_PREFIX,
    USER_PREFIX,
    expiry,
    merge_state,
    split_state_delta,
    strip_temp,
)


@freeze_time("2025-01-01")
def test_defaults():
    s = Session(id="s1", user_id="u1")
    assert s.app_name == "default"
    assert s.created_at == datetime(2025, 1, 1, tzinfo=UTC)
    assert s.expires_at is None  # never, unless asked: expiry deletes
    assert (s.metadata, s.state) == ({}, {})


def test_expiry_is_never_unless_given_and_none_means_never():
    created = datetime(2024, 5, 1, tzinfo=UTC)
    assert Session(id="s", user_id="u", created_at=created).expires_at is None
    assert Session(id="s", user_id="u", expires_at=None).expires_at is None
    past = datetime(2000, 1, 1, tzinfo=UTC)
    assert Session(id="s", user_id="u", expires_at=past).expires_at == past  # no check against now


def test_keyword_only():
    with pytest.raises(TypeError):
        Session("s", "u")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"id": ""}, "id must not be empty"),
        ({"user_id": ""}, "user_id must not be empty"),
        ({"app_name": ""}, "app_name must not be empty"),
        ({"created_at": datetime(2025, 1, 1)}, "created_at must be timezone-aware"),
        ({"expires_at": datetime(2025, 1, 1)}, "expires_at must be timezone-aware"),
    ],
)
def test_validation(overrides, problem):
    with pytest.raises(ValueError, match=problem):
        Session(**{"id": "s", "user_id": "u", **overrides})


def test_immutable_value_with_read_only_mappings():
    s = Session(id="s", user_id="u", metadata={"m": 1}, state={"k": "v"})
    with pytest.raises(TypeError):
        s.state["k"] = "w"  # type: ignore[index]
    with pytest.raises(AttributeError):
        s.user_id = "other"  # type: ignore[misc]
    twin = Session(id="s", user_id="u", created_at=s.created_at, metadata={"m": 1}, state={"k": "v"})
    assert s == twin and hash(s) == hash(twin)


def test_prefixes():
    assert (APP_PREFIX, USER_PREFIX, TEMP_PREFIX) == ("app:", "user:", "temp:")


def test_split_state_delta_routes_strips_and_drops_temp():
    split = split_state_delta(
        {"app:theme": "dark", "user:lang": "fr", "temp:scratch": 1, "count": 2, "session:c": 3, "k": None}
    )
    assert split.app == {"theme": "dark"}
    assert split.user == {"lang": "fr"}
    assert split.session == {"count": 2, "session:c": 3, "k": None}
    app, user, session = split_state_delta(None)
    assert app == user == session == {}


def test_merge_state_restores_prefixes():
    merged = merge_state({"count": 1}, {"theme": "dark"}, {"lang": "fr"})
    assert merged == {"count": 1, "app:theme": "dark", "user:lang": "fr"}
    with pytest.raises(TypeError):
        merged["x"] = 1  # type: ignore[index]


def test_split_then_merge_round_trips_without_temp():
    delta = {"app:a": 1, "user:b": [2], "c": {"d": 3}, "temp:e": 4}
    app, user, session = split_state_delta(delta)
    assert merge_state(session, app, user) == strip_temp(delta)


def test_strip_temp():
    assert strip_temp({"temp:x": 1, "k": "v", "app:t": 2}) == {"k": "v", "app:t": 2}
    assert strip_temp(None) == {}


def test_state_keys_must_be_strings():
    with pytest.raises(ValueError, match="state keys must be strings"):
        split_state_delta({1: "x"})


@pytest.mark.parametrize("field", ["metadata", "state"])
def test_a_mapping_field_that_is_no_mapping_is_named(field):
    with pytest.raises(ValueError, match=f"^{field}: expected a mapping, got list$"):
        Session(id="s", user_id="u", **{field: [("k", "v")]})


def test_expiry_is_created_at_plus_ttl_within_the_datetime_range():
    created = datetime(2025, 1, 1, tzinfo=UTC)
    assert expiry(created, timedelta(hours=1)) == datetime(2025, 1, 1, 1, tzinfo=UTC)
    assert expiry(created, None) is None
    with pytest.raises(ValueError, match=r"^ttl .* is out of range"):
        expiry(created, timedelta.max)
    with pytest.raises(ValueError, match="ttl must be a timedelta or None"):
        expiry(created, 3600)  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl", [timedelta(0), -timedelta(seconds=1), -timedelta(days=1), timedelta.min])
def test_a_ttl_that_is_not_positive_is_refused_not_a_session_born_expired(ttl):
    with pytest.raises(ValueError, match=r"^ttl must be positive \(None: never expires\), got -?\d"):
        expiry(datetime(2025, 1, 1, tzinfo=UTC), ttl)
