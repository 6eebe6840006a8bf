"""The default token counter is found through its entry point, once."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from domain import tokens


@pytest.fixture(autouse=True)
def fresh_cache():
    tokens.default_counter.cache_clear()
    yield
    tokens.default_counter.cache_clear()


def test_loads_the_entry_point_once(monkeypatch):
    calls = []

    def fake_entry_points(*, group, name):
        calls.append((group, name))
        return [EntryPoint("default", "builtins:len", group)]

    monkeypatch.setattr(tokens, "entry_points", lambda **kw: fake_entry_points(**kw))
    monkeypatch.setattr(EntryPoint, "load", lambda self: lambda: len)
    assert tokens.default_counter()("abcd") == 4
    assert tokens.default_counter() is tokens.default_counter()
    assert calls == [("sessionledger.token_counter", "default")]


def test_a_missing_entry_point_is_a_clear_runtime_error(monkeypatch):
    monkeypatch.setattr(tokens, "entry_points", lambda **kw: [])
    with pytest.raises(RuntimeError, match="no token counter installed"):
        tokens.default_counter()
