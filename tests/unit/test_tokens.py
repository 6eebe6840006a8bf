"""The domain finds the default token counter through its entry point, looked up once."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from sessionledger.domain import tokens


@pytest.fixture(autouse=True)
def fresh_lookup():
    tokens._counter_factory.cache_clear()
    yield
    tokens._counter_factory.cache_clear()


def test_the_entry_point_is_looked_up_once_and_its_factory_asked_each_time(monkeypatch):
    lookups, made = [], []

    def fake_entry_points(*, group, name):
        lookups.append((group, name))
        return [EntryPoint("default", "builtins:len", group)]

    def factory():
        made.append(1)
        return len

    monkeypatch.setattr(tokens, "entry_points", fake_entry_points)
    monkeypatch.setattr(EntryPoint, "load", lambda self: factory)
    assert tokens.default_counter()("abcd") == 4
    assert tokens.default_counter() is len
    assert lookups == [("sessionledger.token_counter", "default")]
    assert len(made) == 2


def test_a_missing_entry_point_is_a_clear_runtime_error(monkeypatch):
    monkeypatch.setattr(tokens, "entry_points", lambda **kw: [])
    with pytest.raises(RuntimeError, match="no token counter installed"):
        tokens.default_counter()


def test_the_installed_counter_counts_tokens():
    count = tokens.default_counter()
    assert 0 < count("hello world") <= len("hello world")
