"""The three chat-memory advisors around a model call: on an in-process memory, on the ledger
(memory, SQLite, PostgreSQL), and with a vector store fed by the fake embeddings endpoint. The two
over a chat memory run on both faces (their async twins over the async window memory)."""

from __future__ import annotations

import uuid

import openai
import pytest
from sessionledger.domain import AssistantMessage, MessageType, SystemMessage, ToolCall, UserMessage
from sessionledger.domain.messages import ToolResponse, ToolResponseMessage
from sessionledger.infrastructure.agents import VectorStoreChatMemoryAdvisor
from sessionledger.infrastructure.vectors import EmbeddingsUnavailable, InMemoryVectorStore, OpenAIEmbeddings

from tests.fakes.fake_openai import Reply
from tests.integration import agent_faces

face, service = agent_faces.face, agent_faces.service  # the memory advisors' tests on both faces


def cid() -> str:
    return f"conv-{uuid.uuid4().hex[:10]}"


def turn(advisor, conversation, prompt, reply, **ctx):
    """One model call as the advisors see it: what the model is sent, then its reply stored."""
    sent = advisor.before(conversation, prompt, **ctx)
    advisor.after(conversation, [reply], **ctx)
    return sent


# --- MessageChatMemoryAdvisor ------------------------------------------------------------------


def test_message_advisor_prepends_memory_and_stores_the_user_message_then_the_reply(face):
    memory = face.MessageWindowChatMemory()
    advisor = face.MessageChatMemoryAdvisor(memory)
    conversation = cid()
    first = turn(
        advisor,
        conversation,
        [SystemMessage("Be brief."), UserMessage("Hi, I am Ada.")],
        AssistantMessage("Hello Ada."),
    )
    assert first == [SystemMessage("Be brief."), UserMessage("Hi, I am Ada.")]
    second = advisor.before(conversation, [SystemMessage("Be brief."), UserMessage("Who am I?")])
    # the system message moves to the front; the memory never holds it
    assert second == [
        SystemMessage("Be brief."),
        UserMessage("Hi, I am Ada."),
        AssistantMessage("Hello Ada."),
        UserMessage("Who am I?"),
    ]
    assert memory.get(conversation)[-1] == UserMessage("Who am I?")


def test_message_advisor_does_not_repeat_memory_already_in_the_prompt(face):
    memory = face.MessageWindowChatMemory()
    advisor = face.MessageChatMemoryAdvisor(memory)
    conversation = cid()
    turn(advisor, conversation, [UserMessage("q1")], AssistantMessage("a1"))
    loop = [UserMessage("q1"), AssistantMessage("a1"), UserMessage("q2")]  # a tool loop resends all
    assert advisor.before(conversation, loop) == loop


def test_message_advisor_stores_a_tool_result_and_an_empty_user_message_when_there_is_nothing_else(face):
    memory = face.MessageWindowChatMemory()
    advisor = face.MessageChatMemoryAdvisor(memory)
    conversation = cid()
    result = ToolResponseMessage([ToolResponse("c1", "f", "42")])
    advisor.before(
        conversation, [UserMessage("q"), AssistantMessage(None, [ToolCall("c1", "f", "{}")]), result]
    )
    assert memory.get(conversation) == [result]
    other = cid()
    advisor.before(other, [SystemMessage("only instructions")])
    assert memory.get(other) == [UserMessage("")]


def test_message_advisor_on_the_ledger_keeps_evicted_turns_in_the_ledger(face, service):
    user = f"user-{uuid.uuid4().hex[:8]}"
    memory = face.MessageWindowChatMemory(
        face.LedgerChatMemoryRepository(service, user_id=user), max_messages=4
    )
    advisor = face.MessageChatMemoryAdvisor(memory)
    conversation = cid()
    for i in range(4):
        turn(advisor, conversation, [UserMessage(f"q{i}")], AssistantMessage(f"a{i}"), user_id=user)
    assert [m.text for m in memory.get(conversation)] == ["q2", "a2", "q3", "a3"]
    everything = service.get_events(conversation, user_id=user)
    assert [e.message.text for e in everything if e.archived] == ["q0", "a0", "q1", "a1"]
    with pytest.raises(ValueError, match="belongs to user"):
        advisor.before(conversation, [UserMessage("hijack")], user_id="someone-else")
    assert [m.text for m in memory.get(conversation)] == ["q2", "a2", "q3", "a3"]


@pytest.mark.parametrize("advisor_name", ["MessageChatMemoryAdvisor", "PromptChatMemoryAdvisor"])
def test_memory_advisors_refuse_bad_input_and_store_nothing(face, advisor_name):
    advisor_type = getattr(face, advisor_name)
    memory = face.MessageWindowChatMemory()
    advisor = advisor_type(memory)
    with pytest.raises(ValueError, match="conversationId cannot be null or empty"):
        advisor.before(" ", [UserMessage("x")])
    with pytest.raises(ValueError, match="messages cannot be null"):
        advisor.before("c", None)
    with pytest.raises(ValueError, match="messages cannot contain null elements"):
        advisor.after("c", [AssistantMessage("x"), None])
    assert memory.get("c") == []
    with pytest.raises(ValueError, match="chatMemory cannot be null"):
        advisor_type(None)


# --- PromptChatMemoryAdvisor -------------------------------------------------------------------


def test_prompt_advisor_renders_memory_into_the_system_message_after_its_instructions(face):
    memory = face.MessageWindowChatMemory()
    advisor = face.PromptChatMemoryAdvisor(memory)
    conversation = cid()
    turn(advisor, conversation, [UserMessage("I like tea.")], AssistantMessage("Noted: tea."))
    sent = advisor.before(conversation, [SystemMessage("Be brief."), UserMessage("What do I like?")])
    assert [m.type for m in sent] == [MessageType.SYSTEM, MessageType.USER]
    system = sent[0].text
    assert system.startswith("Be brief.\n")
    assert "USER: I like tea.\nASSISTANT: Noted: tea." in system
    assert system.index("Be brief.") < system.index("USER: I like tea.")
    assert sent[1] == UserMessage("What do I like?")


def test_prompt_advisor_adds_a_system_message_when_there_is_none(face):
    advisor = face.PromptChatMemoryAdvisor(
        face.MessageWindowChatMemory(), template="Memory:\n{memory}\n{instructions}"
    )
    conversation = cid()
    turn(advisor, conversation, [UserMessage("one")], AssistantMessage("two"))
    sent = advisor.before(conversation, [UserMessage("three")])
    assert sent == [SystemMessage("Memory:\nUSER: one\nASSISTANT: two\n"), UserMessage("three")]


def test_prompt_advisor_stores_no_empty_reply_list_and_checks_its_template(face):
    memory = face.MessageWindowChatMemory()
    advisor = face.PromptChatMemoryAdvisor(memory)
    advisor.after("c", [])
    assert memory.get("c") == []
    with pytest.raises(ValueError, match=r"\{memory\}"):
        face.PromptChatMemoryAdvisor(memory, template="{instructions} only")


# --- VectorStoreChatMemoryAdvisor --------------------------------------------------------------


@pytest.fixture
def vector_store(fake_openai):
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    return InMemoryVectorStore(OpenAIEmbeddings(client, model="fake-embedding"))


def test_vector_advisor_recalls_similar_messages_of_the_conversation(vector_store):
    advisor = VectorStoreChatMemoryAdvisor(vector_store, top_k=2)
    conversation = cid()
    turn(
        advisor,
        conversation,
        [UserMessage("my dog is called Rex")],
        AssistantMessage("Rex is a fine dog name"),
    )
    turn(
        advisor,
        conversation,
        [UserMessage("the stock market fell")],
        AssistantMessage("markets are volatile"),
    )
    sent = advisor.before(conversation, [SystemMessage("You help."), UserMessage("what is my dog called")])
    system = sent[0].text
    assert system.startswith("You help.\n")
    assert '<memory-entry type="user">my dog is called Rex</memory-entry>' in system
    assert '<memory-entry type="assistant">Rex is a fine dog name</memory-entry>' in system
    assert "stock" not in system
    assert sent[1:] == [UserMessage("what is my dog called")]


def test_vector_advisor_escapes_stored_text_and_keeps_users_apart(vector_store):
    advisor = VectorStoreChatMemoryAdvisor(vector_store)
    conversation = cid()
    turn(
        advisor,
        conversation,
        [UserMessage('close </memory-entry> & "quote"')],
        AssistantMessage("ok"),
        user_id="ann",
    )
    mine = advisor.before(conversation, [UserMessage("close memory entry quote")], user_id="ann")[0].text
    assert "close &lt;/memory-entry&gt; &amp; &quot;quote&quot;" in mine
    theirs = advisor.before(conversation, [UserMessage("close memory entry quote")], user_id="bob")[0].text
    assert "quote" not in theirs.split("LONG_TERM_MEMORY:")[1]


def test_vector_advisor_checks_its_arguments(vector_store):
    with pytest.raises(ValueError, match="topK must be greater than 0"):
        VectorStoreChatMemoryAdvisor(vector_store, top_k=0)
    with pytest.raises(ValueError, match="topK must be at most 1000, got 5000"):
        VectorStoreChatMemoryAdvisor(vector_store, top_k=5000)  # not at every `before` after
    with pytest.raises(ValueError, match=r"\{long_term_memory\}"):
        VectorStoreChatMemoryAdvisor(vector_store, template="{instructions}")
    with pytest.raises(ValueError, match="store cannot be null"):
        VectorStoreChatMemoryAdvisor(None)
    with pytest.raises(ValueError, match="conversationId cannot be null or empty"):
        VectorStoreChatMemoryAdvisor(vector_store).before("", [UserMessage("x")])


def test_vector_advisor_with_a_failing_embeddings_endpoint_raises_and_stores_nothing(
    vector_store, fake_openai
):
    advisor = VectorStoreChatMemoryAdvisor(vector_store)
    conversation = cid()
    turn(advisor, conversation, [UserMessage("first fact")], AssistantMessage("noted first fact"))
    fake_openai.embedding_failures.append(Reply.status_code(500))
    with pytest.raises(EmbeddingsUnavailable):
        advisor.before(conversation, [UserMessage("second fact")])
    found = vector_store.search("fact", user_id="default-user", top_k=10)
    assert sorted(m.text for m in found) == ["first fact", "noted first fact"]


# --- the advisors over an application's own memory and store ------------------------------------


class AppChatMemory:
    """An application's own `ChatMemory`, written to the protocol alone: `add` takes a list, as the
    protocol says, and iterates it (a single `Message` would be a `TypeError` here)."""

    def __init__(self) -> None:
        self.conversations: dict[str, list] = {}

    def add(self, conversation_id, messages):
        self.conversations.setdefault(conversation_id, []).extend(message for message in messages)

    def get(self, conversation_id):
        return list(self.conversations.get(conversation_id, []))

    def clear(self, conversation_id):
        self.conversations.pop(conversation_id, None)


class AsyncAppChatMemory(AppChatMemory):
    """The same with coroutine methods, for the async advisors."""

    async def add(self, conversation_id, messages):  # type: ignore[override]
        super().add(conversation_id, messages)

    async def get(self, conversation_id):  # type: ignore[override]
        return super().get(conversation_id)

    async def clear(self, conversation_id):  # type: ignore[override]
        super().clear(conversation_id)


class AppVectorStore:
    """An application's own vector store: a dict per user, 'nearest' meaning most words in common."""

    def __init__(self) -> None:
        self.entries: dict[str, list] = {}

    def add(self, conversation_id, messages, *, user_id):
        self.entries.setdefault(user_id, []).extend((conversation_id, m) for m in messages)

    def search(self, text, *, user_id, top_k, conversation_id=None):
        words = set(text.split())
        found = [
            m
            for c, m in self.entries.get(user_id, [])
            if conversation_id in (None, c) and words & set(m.text.split())
        ]
        return found[:top_k]


@pytest.mark.parametrize("advisor_name", ["MessageChatMemoryAdvisor", "PromptChatMemoryAdvisor"])
def test_memory_advisors_store_lists_in_an_applications_own_chat_memory(face, advisor_name):
    memory = AsyncAppChatMemory() if face.is_async else AppChatMemory()
    advisor = getattr(face, advisor_name)(memory)
    conversation = cid()
    turn(
        advisor,
        conversation,
        [SystemMessage("Be brief."), UserMessage("I am Ada.")],
        AssistantMessage("Hi Ada."),
    )
    sent = advisor.before(conversation, [SystemMessage("Be brief."), UserMessage("Who am I?")])
    assert AppChatMemory.get(memory, conversation) == [
        UserMessage("I am Ada."),
        AssistantMessage("Hi Ada."),
        UserMessage("Who am I?"),
    ]
    shown = "\n".join(m.text or "" for m in sent)
    assert "I am Ada." in shown and "Hi Ada." in shown


def test_vector_advisor_over_an_applications_own_store():
    store = AppVectorStore()
    advisor = VectorStoreChatMemoryAdvisor(store)
    conversation = cid()
    turn(advisor, conversation, [UserMessage("my dog is Rex")], AssistantMessage("Rex is a fine dog"))
    sent = advisor.before(conversation, [UserMessage("what is my dog called")])
    assert '<memory-entry type="user">my dog is Rex</memory-entry>' in sent[0].text
    assert [m.text for _, m in store.entries["default-user"]] == [
        "my dog is Rex",
        "Rex is a fine dog",
        "what is my dog called",
    ]
