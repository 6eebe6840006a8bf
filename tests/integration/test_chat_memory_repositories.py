"""One contract suite for the chat-memory repositories: in process memory, and the ledger on
memory, SQLite and PostgreSQL; then what only the ledger's promises (nothing destroyed, users apart).
Each test runs on both faces: the repositories and the window memory, and their async twins."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessionledger.domain import AssistantMessage, EventFilter, SystemMessage, ToolCall, UserMessage
from sessionledger.domain.messages import ToolResponse, ToolResponseMessage

from tests.conftest import SQL_BACKENDS, sql_url
from tests.integration import agent_faces

face, service = agent_faces.face, agent_faces.service  # each test on both faces


@pytest.fixture
def user() -> str:
    return f"user-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["in-memory", "ledger-memory", *(f"ledger-{backend}" for backend in SQL_BACKENDS)])
def repository(request, face, user):
    if request.param == "in-memory":
        yield face.InMemoryChatMemoryRepository()
        return
    if request.param == "ledger-memory":
        url = "memory://"
    else:
        url = sql_url(request, request.param.removeprefix("ledger-"), shared=True)
    with face.open_service(url) as service:
        yield face.LedgerChatMemoryRepository(service, user_id=user)


def cid() -> str:
    return f"conv-{uuid.uuid4().hex[:10]}"


CALL = ToolCall("call-1", "weather", '{"city": "Paris"}')
TURN = [
    SystemMessage("Be brief."),
    UserMessage("Weather in Paris?", metadata={"lang": "en"}),
    AssistantMessage(None, [CALL]),
    ToolResponseMessage([ToolResponse("call-1", "weather", "22C")]),
    AssistantMessage("22C and sunny."),
]


def test_save_all_then_find_returns_the_messages_in_order(repository):
    conversation = cid()
    repository.save_all(conversation, TURN)
    assert repository.find_by_conversation_id(conversation) == TURN
    assert conversation in repository.find_conversation_ids()


def test_an_unknown_conversation_is_empty_and_not_listed(repository):
    conversation = cid()
    assert repository.find_by_conversation_id(conversation) == []
    assert conversation not in repository.find_conversation_ids()


def test_save_all_replaces_everything(repository):
    conversation = cid()
    repository.save_all(conversation, TURN)
    repository.save_all(conversation, [UserMessage("new"), TURN[1]])
    assert repository.find_by_conversation_id(conversation) == [UserMessage("new"), TURN[1]]
    repository.save_all(conversation, TURN[3:])
    assert repository.find_by_conversation_id(conversation) == TURN[3:]


def test_delete_forgets_and_the_id_can_be_saved_again(repository):
    conversation, other = cid(), cid()
    repository.save_all(conversation, TURN)
    repository.save_all(other, [UserMessage("stays")])
    repository.delete_by_conversation_id(conversation)
    assert repository.find_by_conversation_id(conversation) == []
    assert conversation not in repository.find_conversation_ids()
    assert repository.find_by_conversation_id(other) == [UserMessage("stays")]
    repository.save_all(conversation, [UserMessage("again")])
    assert repository.find_by_conversation_id(conversation) == [UserMessage("again")]
    repository.delete_by_conversation_id(cid())  # unknown: a no-op


@pytest.mark.parametrize("bad", [None, "", "   ", 42])
def test_blank_ids_are_refused_with_springs_text(repository, bad):
    for call in (
        lambda: repository.find_by_conversation_id(bad),
        lambda: repository.save_all(bad, []),
        lambda: repository.delete_by_conversation_id(bad),
    ):
        with pytest.raises(ValueError, match=r"^conversationId cannot be null or empty$"):
            call()


def test_none_messages_and_none_elements_are_refused_and_change_nothing(repository):
    conversation = cid()
    repository.save_all(conversation, TURN)
    with pytest.raises(ValueError, match=r"^messages cannot be null$"):
        repository.save_all(conversation, None)
    with pytest.raises(ValueError, match=r"^messages cannot contain null elements$"):
        repository.save_all(conversation, [UserMessage("a"), None])
    with pytest.raises(ValueError, match="must hold Message values"):
        repository.save_all(conversation, ["plain text"])
    assert repository.find_by_conversation_id(conversation) == TURN


def test_a_window_memory_over_the_repository_keeps_whole_turns(face, repository):
    memory = face.MessageWindowChatMemory(repository, max_messages=3)
    conversation = cid()
    memory.add(conversation, [SystemMessage("s"), UserMessage("u1")])
    memory.add(conversation, TURN[2:])  # call, result, answer: 5 non-system > 3, no user after the cut
    assert memory.get(conversation) == [SystemMessage("s")]
    memory.add(conversation, [UserMessage("u2"), AssistantMessage("a2")])
    assert memory.get(conversation) == [SystemMessage("s"), UserMessage("u2"), AssistantMessage("a2")]
    memory.clear(conversation)
    assert memory.get(conversation) == []


# --- the ledger's own promises ----------------------------------------------------------------


def test_what_save_all_replaces_stays_in_the_ledger_archived_and_searchable(face, service, user):
    repository = face.LedgerChatMemoryRepository(service, user_id=user)
    conversation = cid()
    repository.save_all(conversation, TURN)
    repository.save_all(conversation, [UserMessage("fresh start")])
    events = service.get_events(conversation, user_id=user)
    assert [e.message for e in events if e.archived] == TURN
    assert [e.message for e in events if not e.archived] == [UserMessage("fresh start")]
    found = service.get_events(conversation, EventFilter.keyword_search("sunny"), user_id=user)
    assert [e.message.text for e in found] == ["22C and sunny."]
    replayed = service.replay(conversation, user_id=user)
    assert [e.message for e in replayed.window] == [UserMessage("fresh start")]


def test_kept_messages_keep_their_events_and_only_new_ones_are_appended(face, service, user):
    repository = face.LedgerChatMemoryRepository(service, user_id=user)
    conversation = cid()
    repository.save_all(conversation, TURN[:2])
    before = {e.message: e.id for e in service.get_events(conversation)}
    repository.save_all(conversation, [*TURN[:2], TURN[2]])  # only appends: no compaction written
    version = service.event_version(conversation)
    after = service.get_events(conversation)
    assert [e.id for e in after[:2]] == [before[TURN[0]], before[TURN[1]]]
    assert not any(e.archived for e in after)
    repository.save_all(conversation, [TURN[1], TURN[2]])  # drops the system message: one compaction
    assert service.event_version(conversation) == version + 1
    assert [e.message for e in service.get_events(conversation) if e.archived] == [TURN[0]]


def test_delete_keeps_the_history_in_the_ledger(face, service, user):
    repository = face.LedgerChatMemoryRepository(service, user_id=user)
    conversation = cid()
    repository.save_all(conversation, TURN)
    repository.delete_by_conversation_id(conversation)
    assert [e.message for e in service.get_events(conversation)] == TURN
    assert service.get_messages(conversation) == []


def test_another_users_conversation_is_neither_readable_nor_writable(face, service, user):
    mine = face.LedgerChatMemoryRepository(service, user_id=user)
    theirs = face.LedgerChatMemoryRepository(service, user_id=f"{user}-other")
    conversation = cid()
    mine.save_all(conversation, TURN)
    version = service.event_version(conversation)
    for call in (
        lambda: theirs.find_by_conversation_id(conversation),
        lambda: theirs.save_all(conversation, [UserMessage("hijack")]),
        lambda: theirs.save_all(conversation, []),
        lambda: theirs.delete_by_conversation_id(conversation),
    ):
        with pytest.raises(ValueError, match="does not belong to user"):
            call()
    assert conversation not in theirs.find_conversation_ids()
    assert service.event_version(conversation) == version
    assert mine.find_by_conversation_id(conversation) == TURN


def test_conversations_live_in_their_own_app(face, service, user):
    repository = face.LedgerChatMemoryRepository(service, user_id=user)
    service.create_session(user, session_id=(elsewhere := cid()))
    service.append_message(elsewhere, UserMessage("agent session"))
    conversation = cid()
    repository.save_all(conversation, [UserMessage("hi")])
    assert repository.find_conversation_ids() == [conversation]
    assert service.get_session(conversation).app_name == "chat-memory"


def test_saving_an_empty_list_to_an_unknown_conversation_creates_nothing(face, service, user):
    repository = face.LedgerChatMemoryRepository(service, user_id=user)
    conversation = cid()
    repository.save_all(conversation, [])
    assert service.get_session(conversation) is None


def test_constructor_arguments_are_checked(face, service):
    with pytest.raises(ValueError, match="user_id"):
        face.LedgerChatMemoryRepository(service, user_id=" ")
    with pytest.raises(ValueError, match="app_name"):
        face.LedgerChatMemoryRepository(service, app_name="")


_MESSAGES = st.one_of(
    st.builds(UserMessage, st.sampled_from(["u1", "u2", "u3"])),
    st.builds(AssistantMessage, st.sampled_from(["a1", "a2"])),
    st.builds(SystemMessage, st.sampled_from(["s1", "s2"])),
    st.just(TURN[2]),
    st.just(TURN[3]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_MESSAGES, max_size=4), max_size=6), st.integers(1, 6))
def test_the_ledger_window_is_the_in_memory_window_and_the_ledger_forgets_nothing(face, adds, bound):
    with face.open_service("memory://") as service:
        on_ledger = face.MessageWindowChatMemory(face.LedgerChatMemoryRepository(service, user_id="u"), bound)
        in_memory = face.MessageWindowChatMemory(face.InMemoryChatMemoryRepository(), bound)
        conversation = "c"
        windowed = []  # every message some window held (one `add` larger than the window saves
        for messages in adds:  # only its newest messages, as Spring AI's memory does)
            on_ledger.add(conversation, messages)
            in_memory.add(conversation, messages)
            assert on_ledger.get(conversation) == in_memory.get(conversation)
            windowed.extend(m for m in in_memory.get(conversation) if m not in windowed)
        # whatever a window held is in the ledger for good, archived or still in the window
        logged = [e.message for e in service.get_events(conversation)]
        assert all(m in logged for m in windowed)


class SpringOnlyRepository:
    """An application's own repository with Spring's four methods and no `update`."""

    def __init__(self) -> None:
        self.saved: dict[str, list] = {}

    def find_conversation_ids(self):
        return list(self.saved)

    def find_by_conversation_id(self, conversation_id):
        return list(self.saved.get(conversation_id, []))

    def save_all(self, conversation_id, messages):
        self.saved[conversation_id] = list(messages)

    def delete_by_conversation_id(self, conversation_id):
        self.saved.pop(conversation_id, None)


class AsyncSpringOnlyRepository(SpringOnlyRepository):
    """The same with coroutine methods, for the async window memory."""

    async def find_conversation_ids(self):  # type: ignore[override]
        return super().find_conversation_ids()

    async def find_by_conversation_id(self, conversation_id):  # type: ignore[override]
        return super().find_by_conversation_id(conversation_id)

    async def save_all(self, conversation_id, messages):  # type: ignore[override]
        super().save_all(conversation_id, messages)

    async def delete_by_conversation_id(self, conversation_id):  # type: ignore[override]
        super().delete_by_conversation_id(conversation_id)


def test_the_window_memory_reads_then_saves_on_a_repository_without_update(face):
    repository = AsyncSpringOnlyRepository() if face.is_async else SpringOnlyRepository()
    memory = face.MessageWindowChatMemory(repository, max_messages=2)
    for text in ("one", "two", "three"):
        memory.add("c", UserMessage(text))
    assert repository.saved == {"c": [UserMessage("two"), UserMessage("three")]}
