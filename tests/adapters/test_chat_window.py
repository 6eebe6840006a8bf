"""Spring AI 2.0's message window (`domain.chat_window`): examples from its docs, then properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sessionledger.domain import AssistantMessage, MessageType, SystemMessage, ToolCall, UserMessage
from sessionledger.domain.chat_window import checked_id, checked_messages, window
from sessionledger.domain.messages import ToolResponse, ToolResponseMessage
from sessionledger.infrastructure.agents import InMemoryChatMemoryRepository, MessageWindowChatMemory

U, A, S = UserMessage, AssistantMessage, SystemMessage
CALL = AssistantMessage(None, [ToolCall("c1", "f", "{}")])
RESULT = ToolResponseMessage([ToolResponse("c1", "f", "ok")])


def test_under_the_bound_nothing_is_evicted():
    assert window([U("a"), A("b")], [U("c")], 3) == [U("a"), A("b"), U("c")]


def test_the_cut_snaps_forward_to_the_next_user_message():
    memory = [U("u1"), CALL, RESULT, A("a1"), U("u2"), A("a2")]
    # 7 messages, bound 5: the raw cut would keep RESULT without its call
    assert window(memory, [U("u3")], 5) == [U("u2"), A("a2"), U("u3")]


def test_no_user_message_after_the_cut_evicts_every_non_system_message():
    assert window([S("s"), U("u1")], [CALL, RESULT, A("a1")], 3) == [S("s")]


def test_system_messages_are_never_evicted_and_count_towards_the_bound():
    assert window([S("s1"), U("u1")], [U("u2"), U("u3")], 3) == [S("s1"), U("u2"), U("u3")]
    assert window([S("s1"), S("s2")], [U("u1"), U("u2")], 1) == [S("s1"), S("s2")]


def test_a_new_system_message_replaces_the_stored_ones_at_its_own_place():
    assert window([S("old"), U("u1")], [U("u2"), S("new")], 10) == [U("u1"), U("u2"), S("new")]


def test_an_equal_system_message_is_added_again():
    assert window([S("same"), U("u1")], [S("same")], 10) == [S("same"), U("u1"), S("same")]


def test_spring_argument_texts():
    with pytest.raises(ValueError, match=r"^conversationId cannot be null or empty$"):
        checked_id("  ")
    with pytest.raises(ValueError, match=r"^messages cannot be null$"):
        checked_messages(None)
    with pytest.raises(ValueError, match=r"^messages cannot contain null elements$"):
        checked_messages([U("a"), None])
    with pytest.raises(ValueError, match="list of Message"):
        checked_messages("text")
    assert checked_messages(U("one")) == [U("one")]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_max_messages_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="maxMessages must be greater than 0"):
        MessageWindowChatMemory(max_messages=bad)


def test_the_default_memory_is_in_process_with_twenty_messages():
    memory = MessageWindowChatMemory()
    assert isinstance(memory.repository, InMemoryChatMemoryRepository)
    assert memory.max_messages == 20
    for i in range(15):
        memory.add("c", [U(f"u{i}"), A(f"a{i}")])
    assert len(memory.get("c")) == 20 and memory.get("c")[0] == U("u5")


message = st.one_of(
    st.builds(U, st.sampled_from(["u1", "u2", "u3"])),
    st.builds(A, st.sampled_from(["a1", "a2"])),
    st.builds(S, st.sampled_from(["s1", "s2"])),
    st.just(CALL),
    st.just(RESULT),
)


@given(st.lists(message, max_size=12), st.lists(message, max_size=8), st.integers(1, 10))
def test_eviction_properties(memory, new, bound):
    kept = window(memory, new, bound)
    non_system = [m for m in kept if m.type is not MessageType.SYSTEM]
    systems = [m for m in kept if m.type is MessageType.SYSTEM]
    # system messages count towards the bound but are never evicted; the rest are the newest, in order
    assert len(non_system) <= max(0, bound - len(systems))
    processed_non_system = [m for m in [*memory, *new] if m.type is not MessageType.SYSTEM]
    assert non_system == processed_non_system[len(processed_non_system) - len(non_system) :]
    # an eviction leaves a window that starts a turn
    if len(non_system) < len(processed_non_system) and non_system:
        assert non_system[0].type is MessageType.USER
    # nothing is evicted while everything fits
    if len(processed_non_system) + len(systems) <= bound:
        assert non_system == processed_non_system
    # system messages: all kept unless a new one arrived, then only those that came with `new`
    if any(m.type is MessageType.SYSTEM and m not in memory for m in new):
        assert systems == [m for m in new if m.type is MessageType.SYSTEM]
    else:
        assert systems == [m for m in [*memory, *new] if m.type is MessageType.SYSTEM]
    # what is kept is a subsequence of the input
    it = iter([*memory, *new])
    assert all(any(m == x for x in it) for m in kept)
