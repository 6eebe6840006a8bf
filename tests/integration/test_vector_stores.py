"""One contract suite for the vector stores (brute force in memory, sqlite-vec, pgvector on a real
PostgreSQL with the extension), embeddings from the fake OpenAI-compatible endpoint."""

from __future__ import annotations

import uuid

import openai
import psycopg
import pytest
from sessionledger.domain import AssistantMessage, SystemMessage, UserMessage
from sessionledger.domain.messages import ToolResponse, ToolResponseMessage
from sessionledger.infrastructure.vectors import (
    EmbeddingsUnavailable,
    InMemoryVectorStore,
    OpenAIEmbeddings,
    PgVectorStore,
    SqliteVecStore,
)

from tests.fakes.fake_openai import Reply, fake_embedding


@pytest.fixture
def embeddings(fake_openai):
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    return OpenAIEmbeddings(client, model="fake-embedding")


@pytest.fixture(params=["memory", "sqlite-vec", "pgvector"])
def store(request, embeddings, tmp_path):
    if request.param == "memory":
        yield InMemoryVectorStore(embeddings)
    elif request.param == "sqlite-vec":
        with SqliteVecStore(f"sqlite:///{tmp_path / 'vectors.db'}", embeddings) as opened:
            yield opened
    else:
        with PgVectorStore(request.getfixturevalue("pgvector_url"), embeddings) as opened:
            yield opened


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def texts(messages):
    return [m.text for m in messages]


def test_the_fake_embeddings_put_texts_that_share_words_close():
    cat, fish, stocks = (fake_embedding(t) for t in ("my cat", "cat likes fish", "stock prices fell"))
    assert sum(a * b for a, b in zip(cat, fish, strict=True)) > sum(
        a * b for a, b in zip(cat, stocks, strict=True)
    )


def test_search_returns_the_nearest_messages_first(store):
    user, conversation = new_id("user"), new_id("conv")
    store.add(
        conversation,
        [
            UserMessage("stock prices fell sharply today"),
            AssistantMessage("my cat likes fish"),
            UserMessage("rain"),
        ],
        user_id=user,
    )
    found = store.search("does the cat like fish", user_id=user, top_k=2)
    assert texts(found)[0] == "my cat likes fish"
    assert len(found) == 2
    assert found[0] == AssistantMessage("my cat likes fish")


def test_a_search_never_returns_another_users_messages(store):
    mine, theirs, conversation = new_id("user"), new_id("user"), new_id("conv")
    store.add(conversation, [UserMessage("secret plan about the cat")], user_id=theirs)
    store.add(new_id("conv"), [UserMessage("weather report")], user_id=mine)
    assert texts(store.search("secret plan about the cat", user_id=mine, top_k=10)) == ["weather report"]
    assert texts(store.search("anything", user_id=new_id("nobody"), top_k=4)) == []
    assert texts(store.search("cat", user_id=mine, top_k=4, conversation_id=conversation)) == []


def test_a_search_can_keep_to_one_conversation(store):
    user, first, second = new_id("user"), new_id("conv"), new_id("conv")
    store.add(first, [UserMessage("apples are red")], user_id=user)
    store.add(second, [UserMessage("apples are green")], user_id=user)
    assert texts(store.search("apples", user_id=user, top_k=4, conversation_id=second)) == [
        "apples are green"
    ]
    assert sorted(texts(store.search("apples", user_id=user, top_k=4))) == [
        "apples are green",
        "apples are red",
    ]


def test_only_user_and_assistant_messages_with_text_are_stored(store):
    user, conversation = new_id("user"), new_id("conv")
    store.add(
        conversation,
        [
            SystemMessage("system rules"),
            ToolResponseMessage([ToolResponse("c", "f", "tool rules")]),
            AssistantMessage(None),
            UserMessage("   "),
            UserMessage("user rules"),
        ],
        user_id=user,
    )
    assert texts(store.search("rules", user_id=user, top_k=10)) == ["user rules"]


def test_top_k_bounds_the_answer(store):
    user, conversation = new_id("user"), new_id("conv")
    store.add(conversation, [UserMessage(f"note number {i}") for i in range(6)], user_id=user)
    assert len(store.search("note number", user_id=user, top_k=3)) == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.add("  ", [UserMessage("x")], user_id="u"), "conversationId cannot be null or empty"),
        (lambda s: s.add(None, [UserMessage("x")], user_id="u"), "conversationId cannot be null or empty"),
        (lambda s: s.add("c", None, user_id="u"), "messages cannot be null"),
        (
            lambda s: s.add("c", [UserMessage("x"), None], user_id="u"),
            "messages cannot contain null elements",
        ),
        (lambda s: s.add("c", [UserMessage("x")], user_id=""), "user_id must be a non-empty string"),
        (lambda s: s.search("x", user_id=None, top_k=4), "user_id must be a non-empty string"),
        (lambda s: s.search("x", user_id="u", top_k=0), "top_k must be greater than 0"),
        (lambda s: s.search(None, user_id="u", top_k=4), "text must be a string"),
        (lambda s: s.search("x", user_id="u", top_k=4, conversation_id=" "), "conversationId cannot be null"),
    ],
)
def test_bad_input_is_a_value_error(store, call, message):
    with pytest.raises(ValueError, match=message):
        call(store)


def test_a_failing_embeddings_endpoint_is_a_clear_error_and_changes_nothing(store, fake_openai):
    user, conversation = new_id("user"), new_id("conv")
    store.add(conversation, [UserMessage("kept message")], user_id=user)
    fake_openai.embedding_failures.append(Reply.status_code(503, "embeddings are down"))
    with pytest.raises(EmbeddingsUnavailable, match="embeddings endpoint failed for model 'fake-embedding'"):
        store.add(conversation, [UserMessage("lost message"), AssistantMessage("lost reply")], user_id=user)
    fake_openai.embedding_failures.append(Reply.garbage())
    with pytest.raises(EmbeddingsUnavailable):
        store.search("kept", user_id=user, top_k=4)
    assert texts(store.search("message", user_id=user, top_k=10)) == ["kept message"]


def test_openai_embeddings_checks_its_arguments(fake_openai):
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    with pytest.raises(ValueError, match="client"):
        OpenAIEmbeddings(None)
    with pytest.raises(ValueError, match="model"):
        OpenAIEmbeddings(client, model=" ")
    embeddings = OpenAIEmbeddings(client, model="m")
    assert embeddings.embed([]) == []
    assert embeddings.embed(["a b", "c"]) == [fake_embedding("a b"), fake_embedding("c")]
    assert fake_openai.embedding_requests[-1].body["model"] == "m"


# --- what an embedder gives is checked before anything is stored (issue 25) ---------------------


class Scripted:
    """An embedder that answers the fake's vectors, or what the test sets `answer` to (a function
    of the texts) for the next calls."""

    def __init__(self, answer=None) -> None:
        self.answer = answer

    def embed(self, texts):
        if self.answer is not None:
            return self.answer(texts)
        return [fake_embedding(text) for text in texts]


@pytest.fixture(params=["memory", "sqlite-vec", "pgvector"])
def scripted(request, tmp_path):
    """A store of each kind (pgvector in a database of its own) over a `Scripted` embedder."""
    embedder = Scripted()
    if request.param == "memory":
        yield InMemoryVectorStore(embedder), embedder
    elif request.param == "sqlite-vec":
        with SqliteVecStore(f"sqlite:///{tmp_path / 'vectors.db'}", embedder) as opened:
            yield opened, embedder
    else:
        with PgVectorStore(request.getfixturevalue("pgvector_database"), embedder) as opened:
            yield opened, embedder


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (lambda texts: None, "the embedder gave NoneType for 1 texts"),
        (lambda texts: [], "the embedder gave 0 vectors for 1 texts"),
        (lambda texts: ["0.1, 0.2"], "vector 0 is a str, not a list of numbers"),
        (lambda texts: [None], "vector 0 is a NoneType"),
        (lambda texts: [["0.1", "0.2"]], "vector 0 holds '0.1', not a finite number"),
        (lambda texts: [[0.1, float("nan")]], "vector 0 holds nan"),
        (lambda texts: [[True, False]], "vector 0 holds True"),
        (lambda texts: [[]], "vector 0 is empty"),
        (lambda texts: [[0.1] * 64, [0.1] * 3], "dimensions \\[3, 64\\] in one answer"),
        (
            lambda texts: [[0.5] * 3 for _ in texts],
            "holds vectors of dimension 64; the embedder's vectors have",
        ),
    ],
)
def test_an_embedder_that_breaks_its_promise_is_a_value_error_and_nothing_is_stored(
    scripted, answer, problem
):
    store, embedder = scripted
    user, conversation = new_id("user"), new_id("conv")
    store.add(conversation, [UserMessage("kept note")], user_id=user)
    embedder.answer = answer
    with pytest.raises(ValueError, match=problem):
        store.add(
            conversation,
            [UserMessage("lost note"), AssistantMessage("lost reply")][: 2 if "in one" in problem else 1],
            user_id=user,
        )
    embedder.answer = None
    assert texts(store.search("note", user_id=user, top_k=10)) == ["kept note"]


def test_the_first_vectors_fix_the_dimension_and_a_query_of_another_is_a_value_error(scripted):
    """Issue 25: one vector of another dimension made every later search of that user fail in
    memory, and the SQLite store skipped such rows silently."""
    store, embedder = scripted
    user = new_id("user")
    assert store.search("nothing stored yet", user_id=user, top_k=4) == []
    embedder.answer = lambda texts: [[1.0, 0.0, 0.5] for _ in texts]
    store.add(new_id("conv"), [UserMessage("three numbers")], user_id=user)
    embedder.answer = lambda texts: [[1.0, 0.0] for _ in texts]
    with pytest.raises(
        ValueError, match="holds vectors of dimension 3; the embedder's vectors have dimension 2"
    ):
        store.add(new_id("conv"), [UserMessage("two numbers")], user_id=new_id("another"))
    with pytest.raises(ValueError, match="holds vectors of dimension 3; the query has dimension 2"):
        store.search("two numbers", user_id=user, top_k=4)
    embedder.answer = lambda texts: [[1.0, 0.0, 0.5] for _ in texts]
    assert texts(store.search("three numbers", user_id=user, top_k=4)) == ["three numbers"]


@pytest.mark.parametrize("top_k", [1001, 2**63, 10**30])
def test_top_k_is_at_most_a_thousand(store, top_k):
    """Issue 25: `top_k=2**63` was an `OverflowError` on SQLite."""
    user = new_id("user")
    store.add(new_id("conv"), [UserMessage("a note")], user_id=user)
    with pytest.raises(ValueError, match=f"top_k must be at most 1000, got {top_k}"):
        store.search("note", user_id=user, top_k=top_k)
    assert texts(store.search("note", user_id=user, top_k=1000)) == ["a note"]


@pytest.mark.postgres
def test_pgvector_on_a_server_without_the_extension_says_what_is_missing_in_one_line(embeddings, pg_url):
    with psycopg.connect(pg_url.replace("+psycopg", "")) as connection:
        if connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
            pytest.skip("this PostgreSQL has pgvector (the store suite above runs on it)")
        major = connection.info.server_version // 10000
        host, port = connection.info.host, connection.info.port
    with pytest.raises(ValueError) as raised:
        PgVectorStore(pg_url, embeddings)
    assert str(raised.value) == (
        f"PostgreSQL at {host}:{port} has no pgvector extension: install it (Debian: "
        f"postgresql-{major}-pgvector, or https://github.com/pgvector/pgvector) and run `sessionledger "
        "migrate`, or use SQLite (sqlite-vec)"
    )


def test_a_zero_vector_is_as_far_as_an_orthogonal_one_on_every_store(scripted):
    """sqlite-vec's distance to a zero vector is NULL, which sorted it first for every query."""
    store, embedder = scripted
    user = new_id("user")
    vectors = {"zero": [0.0, 0.0], "same": [1.0, 0.0], "opposite": [-1.0, 0.0], "orthogonal": [0.0, 1.0]}
    embedder.answer = lambda texts: [vectors.get(text, [1.0, 0.0]) for text in texts]
    for text in vectors:
        store.add(new_id("conv"), [UserMessage(text)], user_id=user)
    assert texts(store.search("query", user_id=user, top_k=4)) == ["same", "zero", "orthogonal", "opposite"]
