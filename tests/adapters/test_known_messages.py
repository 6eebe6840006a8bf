"""`KnownMessages.key`: a saver remembers a message's key while the message lives, and the entry
goes with the message, never taking a newer entry under the same id with it."""

from __future__ import annotations

import gc
import weakref

from langchain_core.messages import AIMessage, HumanMessage
from sessionledger.infrastructure.langgraph.checkpoints import KnownMessages


def test_a_collected_message_takes_its_entry_and_keeps_its_stored_key() -> None:
    known = KnownMessages()
    message = HumanMessage("hello", id="m1")
    known.key(message, "m1/a")
    known.stored.add("m1/a")
    assert known.keyed["m1"][0]() is message
    del message
    gc.collect()
    assert known.keyed == {}
    assert known.stored == {"m1/a"}


def test_an_older_message_collected_later_leaves_the_newer_entry() -> None:
    known = KnownMessages()
    older, newer = AIMessage("first", id="m1"), AIMessage("edited", id="m1")
    known.key(older, "m1/a")
    known.key(newer, "m1/b")
    del older
    gc.collect()
    assert known.keyed["m1"][0]() is newer
    assert known.keyed["m1"][1] == "m1/b"


def test_a_forgotten_thread_s_cache_is_freed_at_once() -> None:
    """The entries' callbacks hold the cache weakly: no reference cycle keeps a cache the saver
    forgot (with the collector off, reference counting alone frees it)."""
    known, message = KnownMessages(), HumanMessage("hello", id="m1")
    known.key(message, "m1/a")
    cache = weakref.ref(known)
    gc.collect()
    gc.disable()
    try:
        del known
        assert cache() is None
    finally:
        gc.enable()
    del message  # its callback finds no cache to clean
