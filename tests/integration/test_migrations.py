"""The Alembic migrations build exactly the schema `infrastructure.ledger.schema` declares, and an
older database upgrades in place without losing what it holds; the vector stores' table is
migrated by the same runner, in a history of its own (SQLite, and PostgreSQL with pgvector)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.domain.entries import Entry
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.audit import verify
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.ledger.migrate import (
    VECTORS,
    _config,
    current_revision,
    head_revision,
    upgrade,
)
from sessionledger.infrastructure.ledger.schema import metadata
from sessionledger.infrastructure.ledger.text_index import FTS_TABLE, INDEXED_TABLES
from sessionledger.infrastructure.vectors import PgVectorStore, SqliteVecStore
from sessionledger.infrastructure.vectors.schema import ExtensionMissing, migrate_vectors

from tests.conftest import SQL_BACKENDS, sql_url
from tests.fakes.fake_openai import fake_embedding

CLI = str(Path(sys.executable).with_name("sessionledger"))


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def test_the_written_head_revision_is_alembics_head() -> None:
    """Opening a ledger compares its revision with `head_revision()` without loading alembic: a new
    migration must move that constant too, or writers would skip it and readers refuse the result.
    The same holds for the vectors' history, which shares none of the ledger's revisions."""
    assert head_revision() == ScriptDirectory.from_config(_config()).get_current_head()
    vectors = ScriptDirectory.from_config(_config(VECTORS))
    assert head_revision(VECTORS) == vectors.get_current_head()
    ledger = ScriptDirectory.from_config(_config())
    assert {r.revision for r in vectors.walk_revisions()}.isdisjoint(
        r.revision for r in ledger.walk_revisions()
    )


def test_a_migrated_ledger_is_found_current_in_one_query(fresh_url: str) -> None:
    """Every open of a ledger asks its revision: one query where the schema is there (asking the
    catalog first recompiled SQLAlchemy's reflection query for every new engine, a quarter of the
    time a ledger opened per request took to open), and still `None` where there is none."""
    engine = create_ledger_engine(fresh_url)
    sent: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    try:
        with engine.connect() as connection:
            assert current_revision(connection) is None
            upgrade(engine)
            assert current_revision(connection, VECTORS) is None
            sent.clear()
            assert current_revision(connection) == head_revision()
        assert sent == ["SELECT version_num FROM alembic_version"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_a_revision_table_made_while_its_query_failed_is_read(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Openers racing on a fresh database: one's revision query fails for want of the table just as
    another's upgrade makes it (MariaDB commits each DDL statement at once, so the table shows
    before that upgrade ends). The first reads the table then, where it raised the failed query's
    error; found on MariaDB by four services opened at once."""
    url = sql_url(request, backend)
    engine, other = create_ledger_engine(url), create_ledger_engine(url)

    def made_by_another_opener(context: sa.engine.ExceptionContext) -> None:
        with other.begin() as connection:
            connection.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            connection.execute(sa.text("INSERT INTO alembic_version VALUES ('0001')"))

    sa.event.listen(engine, "handle_error", made_by_another_opener, once=True)
    try:
        with engine.connect() as connection:
            assert current_revision(connection) == "0001"
    finally:
        engine.dispose()
        other.dispose()


def test_migrated_schema_matches_the_declared_tables(fresh_url: str) -> None:
    engine = create_ledger_engine(fresh_url)
    try:
        upgrade(engine)
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"include_name": _declared})
            differences = compare_metadata(context, metadata)
            assert current_revision(connection) == head_revision()
    finally:
        engine.dispose()
    assert differences == []


def _declared(name: str | None, type_: str, parent_names: object) -> bool:
    """Whether schema.py declares the object: the keyword index's tables exist on one dialect
    each (tests/integration/test_text_index.py checks them), FTS5's shadow tables with them."""
    if type_ != "table" or name is None:
        return True
    return name not in INDEXED_TABLES and not name.startswith(f"{FTS_TABLE}_")


def test_counters_a_worker_created_before_0002_survive_the_upgrade(fresh_url: str) -> None:
    engine = create_ledger_engine(fresh_url)
    try:
        with engine.begin() as connection:  # the schema as 0001 left it, plus the worker's own table
            config = _config()
            config.attributes["connection"] = connection
            command.upgrade(config, "0001")
            connection.execute(
                sa.text("CREATE TABLE worker_counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)")
            )
            connection.execute(sa.text("INSERT INTO worker_counters VALUES ('events_ingested', 42)"))
        upgrade(engine)
        with engine.connect() as connection:
            assert current_revision(connection) == head_revision() != "0001"
            stored = connection.execute(sa.text("SELECT name, value FROM worker_counters")).all()
    finally:
        engine.dispose()
    assert stored == [("events_ingested", 42)]


def test_a_ledger_at_0004_upgrades_to_0007_keeping_its_sessions_and_gains_the_token_table(
    fresh_url: str,
) -> None:
    """0007 only adds `access_tokens`: a ledger written at 0004 keeps its sessions, verifies, and
    can hold tokens afterwards."""
    from sessionledger.domain.access import Grant, issue
    from sessionledger.infrastructure.bootstrap import open_storage
    from sessionledger.infrastructure.settings import Settings

    engine = create_ledger_engine(fresh_url)
    try:
        with engine.begin() as connection:
            config = _config()
            config.attributes["connection"] = connection
            command.upgrade(config, "0004")
            assert "access_tokens" not in sa.inspect(connection).get_table_names()
        with open_storage(Settings(database_url=fresh_url)) as storage:  # upgrades to the head
            session = storage.service.create_session("alice")
            storage.service.append_message(session.id, UserMessage("kept"))
            _, stored = issue(Grant("alice"), session.created_at)
            storage.access_tokens.add(stored)
            assert storage.access_tokens.find(stored.token_id) == stored
            assert verify(storage.service, session.id).ok
        with engine.connect() as connection:
            assert current_revision(connection) == "0008" == head_revision()
    finally:
        engine.dispose()


def test_tokens_made_at_0007_read_only_after_0008_and_write_tokens_keep_their_flag(fresh_url: str) -> None:
    """0008 adds `access_tokens.write`: a token stored before it grants reading only, as it did,
    and a token stored after it keeps whether it may write."""
    from datetime import UTC, datetime

    from sessionledger.domain.access import Grant, issue
    from sessionledger.infrastructure.bootstrap import open_storage
    from sessionledger.infrastructure.settings import Settings

    now = datetime.now(UTC)
    _, old = issue(Grant("alice"), now)
    engine = create_ledger_engine(fresh_url)
    try:
        with engine.begin() as connection:
            config = _config()
            config.attributes["connection"] = connection
            command.upgrade(config, "0007")
            columns = ("token_id", "secret_sha256", "user_id", "admin", "created_at")
            connection.execute(
                sa.insert(sa.table("access_tokens", *map(sa.column, columns))),
                [
                    {
                        "token_id": old.token_id,
                        "secret_sha256": old.secret_sha256,
                        "user_id": "alice",
                        "admin": False,
                        "created_at": now,
                    }
                ],
            )
        with open_storage(Settings(database_url=fresh_url)) as storage:  # upgrades to the head
            found = storage.access_tokens.find(old.token_id)
            assert found is not None and found.grant == Grant("alice", admin=False, write=False)
            _, writer = issue(Grant("bob", write=True), now)
            storage.access_tokens.add(writer)
            assert storage.access_tokens.find(writer.token_id) == writer
    finally:
        engine.dispose()


def test_payloads_are_compressed_with_lz4_from_0004_and_older_pglz_rows_still_read(pg_url: str) -> None:
    """0004 changes only the setting: a long payload stored before it stays pglz, one stored after
    is lz4, and both read back and verify as they were appended."""
    before, after = (
        f"{name}: " + "a long model answer, compressed when stored. " * 200 for name in ("a", "b")
    )
    engine = create_ledger_engine(pg_url)
    try:
        with open_service(pg_url) as service:
            session = service.create_session("alice", app_name="app")
            _migrate(engine, "0003")  # the schema before 0004
            service.append_message(session.id, UserMessage(before))
            _migrate(engine, "0004")
            service.append_message(session.id, UserMessage(after))
            assert [m.text for m in service.get_messages(session.id)] == [before, after]
            assert verify(service, session.id).ok
        with engine.connect() as connection:
            stored = connection.execute(
                sa.text(
                    "SELECT pg_column_compression(payload) FROM ledger"
                    " WHERE session_id = :sid AND kind = 'event' ORDER BY position"
                ),
                {"sid": session.id},
            ).scalars()
            assert list(stored) == ["pglz", "lz4"]
    finally:
        engine.dispose()


def test_0005_keeps_event_ids_unique_in_a_partial_index_that_the_id_check_reads(fresh_url: str) -> None:
    """From 0005 the (session_id, event_id) index holds only rows with an event id: a ledger
    written before it keeps every row and its chain, a repeated event id is still a duplicate,
    and the ledger's check for stored ids (`taken_event_ids`) still reads the index."""
    engine = create_ledger_engine(fresh_url)
    postgres = engine.dialect.name == "postgresql"
    try:
        with open_service(fresh_url) as service:
            session = service.create_session("alice", app_name="app")
            _migrate(engine, "0004")  # down: the constraint over every row, as before 0005
            first = SessionEvent(session_id=session.id, message=UserMessage("hi"), id="m1")
            assert service.append_event(first)
            service.append_entries(session.id, [Entry("checkpoint", "1", {"step": 1})])
            _migrate(engine, "0005")
            assert not service.append_event(first)  # the index still refuses the id
            service.append_entries(session.id, [Entry("checkpoint", "2", {"step": 2})])
            assert service.append_event(replace(first, id="m2", message=UserMessage("there")))
            assert [m.text for m in service.get_messages(session.id)] == ["hi", "there"]
            assert [e.key for e in service.entries(session.id, "checkpoint")] == ["2", "1"]
            assert verify(service, session.id).ok
        with engine.connect() as connection:
            definition = connection.execute(
                sa.text(
                    "SELECT pg_get_indexdef('uq_ledger_session_event'::regclass)"
                    if postgres
                    else "SELECT sql FROM sqlite_master WHERE name = 'uq_ledger_session_event'"
                )
            ).scalar_one()
            assert "(session_id, event_id) WHERE" in definition and "event_id IS NOT NULL" in definition
            if postgres:
                connection.execute(sa.text("SET enable_seqscan = off"))  # a tiny table: else a scan wins
            taken = statements.taken_event_ids([session.id], ["m1", "m2"])
            sql = str(taken.compile(engine, compile_kwargs={"literal_binds": True}))
            plan = connection.execute(sa.text(("EXPLAIN " if postgres else "EXPLAIN QUERY PLAN ") + sql))
            assert "uq_ledger_session_event" in " ".join(str(row) for row in plan)
            assert len(connection.execute(taken).all()) == 2
    finally:
        engine.dispose()


def _migrate(engine: sa.Engine, revision: str) -> None:
    """Up or down to `revision`."""
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        now = current_revision(connection)
        if now is not None and now > revision:
            command.downgrade(config, revision)
        else:
            command.upgrade(config, revision)


# --- the vector stores' table, through the same runner (issue 26) -------------------------------


class Fixed:
    """An embedder giving the fake endpoint's vectors (64 numbers), or `dimension` numbers."""

    def __init__(self, dimension: int | None = None) -> None:
        self.dimension = dimension

    def embed(self, texts):
        if self.dimension is not None:
            return [[1.0] * self.dimension for _ in texts]
        return [fake_embedding(text) for text in texts]


@pytest.fixture(params=["sqlite", "pgvector"])
def vector_url(request, tmp_path) -> str:
    """A new, empty database for a vector store: a SQLite file, or one on the pgvector server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'vectors.db'}"
    return request.getfixturevalue("pgvector_database")


def _store(url: str, embeddings=None):
    embeddings = embeddings or Fixed()
    return SqliteVecStore(url, embeddings) if url.startswith("sqlite") else PgVectorStore(url, embeddings)


def _vector_schema(url: str) -> tuple[str | None, str | None, set[str], set[str]]:
    """The ledger's and the vectors' revisions, the vector table's columns and its indexes."""
    engine = create_ledger_engine(url)
    try:
        with engine.connect() as connection, warnings.catch_warnings():
            warnings.simplefilter("ignore", sa.exc.SAWarning)  # SQLAlchemy knows no `vector` type
            inspector = sa.inspect(connection)
            has_table = inspector.has_table("chat_memory_vectors")
            columns = (
                {c["name"] for c in inspector.get_columns("chat_memory_vectors")} if has_table else set()
            )
            indexes = (
                {i["name"] or "" for i in inspector.get_indexes("chat_memory_vectors")}
                if has_table
                else set()
            )
            return current_revision(connection), current_revision(connection, VECTORS), columns, indexes
    finally:
        engine.dispose()


def _migrate_all(url: str) -> str:
    """What `sessionledger migrate` does: the ledger's schema, then the vector table."""
    engine = create_ledger_engine(url)
    try:
        upgrade(engine)
        return migrate_vectors(engine)
    finally:
        engine.dispose()


def _count(url: str, sql: str) -> int:
    engine = create_ledger_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(sa.text(sql)).scalar_one())
    finally:
        engine.dispose()


COLUMNS = {"id", "user_id", "conversation_id", "message_type", "text", "embedding"}


def test_migrate_creates_the_vector_table_beside_the_ledger(vector_url: str) -> None:
    assert _migrate_all(vector_url) == head_revision(VECTORS) == "vectors_0002"
    ledger, vectors, columns, indexes = _vector_schema(vector_url)
    assert (ledger, vectors) == (head_revision(), head_revision(VECTORS))
    assert columns == COLUMNS and "chat_memory_vectors_owner" in indexes
    with _store(vector_url) as store:
        store.add("c", [UserMessage("bees on the roof")], user_id="ada")
        assert [m.text for m in store.search("bees", user_id="ada")] == ["bees on the roof"]


def test_the_sessionledger_migrate_command_migrates_the_vector_table_too(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    done = subprocess.run([CLI, "migrate", "--database-url", url], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "its vector table is at revision vectors_0002" in done.stdout
    assert _vector_schema(url)[:3] == (head_revision(), head_revision(VECTORS), COLUMNS)


def test_a_store_on_an_unmigrated_database_migrates_its_table_and_not_the_ledger(vector_url: str) -> None:
    assert _vector_schema(vector_url) == (None, None, set(), set())
    with _store(vector_url) as store:
        store.add("c", [UserMessage("a first note")], user_id="ada")
    assert _vector_schema(vector_url)[:3] == (None, head_revision(VECTORS), COLUMNS)
    with open_service(vector_url):  # the ledger's history, in the same database, is its own
        pass
    assert _vector_schema(vector_url)[:2] == (head_revision(), head_revision(VECTORS))


def test_migrating_twice_changes_nothing(vector_url: str) -> None:
    _migrate_all(vector_url)
    with _store(vector_url) as store:
        store.add("c", [UserMessage("kept note")], user_id="ada")
    assert _migrate_all(vector_url) == head_revision(VECTORS)
    with _store(vector_url) as store:
        assert [m.text for m in store.search("note", user_id="ada")] == ["kept note"]
    assert _count(vector_url, "SELECT count(*) FROM vectors_alembic_version") == 1
    assert _count(vector_url, "SELECT count(*) FROM chat_memory_vectors") == 1


# The vector table as the stores made it for themselves before the migrations (git: the DDL of
# infrastructure/vectors/sqlite_vec.py and pgvector.py before issue 26), a row in it.
OLD_SQLITE = [
    """CREATE TABLE IF NOT EXISTS chat_memory_vectors (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    message_type TEXT NOT NULL,
    text TEXT NOT NULL,
    embedding BLOB NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS chat_memory_vectors_owner ON chat_memory_vectors (user_id, conversation_id)",
    "INSERT INTO chat_memory_vectors (user_id, conversation_id, message_type, text, embedding)"
    " VALUES ('ada', 'old', 'user', 'an old note', :vector)",
]
OLD_POSTGRES = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TABLE IF NOT EXISTS chat_memory_vectors (id bigserial PRIMARY KEY,"
    " user_id text NOT NULL, conversation_id text NOT NULL,"
    " message_type text NOT NULL, text text NOT NULL,"
    " embedding vector(64) NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chat_memory_vectors_owner ON chat_memory_vectors (user_id, conversation_id)",
    "INSERT INTO chat_memory_vectors (user_id, conversation_id, message_type, text, embedding)"
    " VALUES ('ada', 'old', 'user', 'an old note', CAST(:vector AS vector))",
]


def test_a_vector_table_the_previous_release_made_upgrades_in_place(vector_url: str) -> None:
    import sqlite_vec

    sqlite = vector_url.startswith("sqlite")
    vector = fake_embedding("an old note")
    encoded = sqlite_vec.serialize_float32(vector) if sqlite else str(vector)
    with open_service(vector_url):  # the ledger as the previous release left it (at 0004)
        pass
    engine = create_ledger_engine(vector_url)
    try:
        with engine.begin() as connection:
            for statement in OLD_SQLITE if sqlite else OLD_POSTGRES:
                connection.execute(sa.text(statement), {"vector": encoded})
    finally:
        engine.dispose()
    assert _migrate_all(vector_url) == head_revision(VECTORS)
    assert _vector_schema(vector_url)[:3] == (head_revision(), head_revision(VECTORS), COLUMNS)
    with _store(vector_url) as store:
        store.add("new", [UserMessage("a new note")], user_id="ada")
        assert sorted(m.text for m in store.search("note", user_id="ada", top_k=4)) == [
            "a new note",
            "an old note",
        ]
    with _store(vector_url, Fixed(3)) as store, pytest.raises(ValueError, match="dimension 64"):
        store.add("c", [UserMessage("three numbers")], user_id="ada")


def test_the_keyed_vector_tables_come_in_an_upgrade_from_vectors_0001(vector_url: str) -> None:
    """A database at vectors_0001 (the chat memory table, a row in it) upgrades to vectors_0002 in
    place: the keyed tables appear, empty (their rows are derived, rebuilt from the ledger), and
    the chat memory keeps what it held."""
    from sessionledger.infrastructure.vectors.keyed import KeyedChange, keyed_vectors

    engine = create_ledger_engine(vector_url)
    try:
        with engine.begin() as connection:
            config = _config(VECTORS)
            config.attributes["connection"] = connection
            command.upgrade(config, "vectors_0001")
        with engine.connect() as connection:
            assert current_revision(connection, VECTORS) == "vectors_0001"
            assert not sa.inspect(connection).has_table("keyed_vectors")
    finally:
        engine.dispose()
    with _store(vector_url) as store:  # opening a store migrates: to vectors_0002
        store.add("c", [UserMessage("a note from before")], user_id="ada")
    engine = create_ledger_engine(vector_url)
    try:
        with engine.connect() as connection, warnings.catch_warnings():
            warnings.simplefilter("ignore", sa.exc.SAWarning)
            inspector = sa.inspect(connection)
            assert current_revision(connection, VECTORS) == "vectors_0002"
            assert {c["name"] for c in inspector.get_columns("keyed_vectors")} == {
                "owner",
                "namespace",
                "key",
                "field",
                "position",
                "embedding",
            }
            assert inspector.get_pk_constraint("keyed_vector_marks")["constrained_columns"] == [
                "owner",
                "namespace",
            ]
    finally:
        engine.dispose()
    with keyed_vectors(vector_url) as keyed:  # type: ignore[attr-defined]
        keyed.write("ada", "n.", [KeyedChange("k", 1, {"text": [1.0, 0.0]})], through=1)
        assert [s.key for s in keyed.search("ada", "", [1.0, 0.0], limit=5)] == ["k"]
    with _store(vector_url) as store:
        assert [m.text for m in store.search("note", user_id="ada")] == ["a note from before"]


@pytest.mark.postgres
def test_without_pgvector_the_ledger_migrates_and_the_vectors_say_what_is_missing(pg_url: str) -> None:
    """This machine's PostgreSQL has no pgvector: the ledger is migrated all the same, the vector
    table is neither made nor recorded (so a migrate after installing it makes it), and the store
    and `sessionledger migrate` say in one line what is missing."""
    with psycopg.connect(pg_url.replace("+psycopg", "")) as connection:
        if connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
            pytest.skip("this PostgreSQL has pgvector")
        host, port, major = (
            connection.info.host,
            connection.info.port,
            connection.info.server_version // 10000,
        )
    line = (
        f"PostgreSQL at {host}:{port} has no pgvector extension: install it (Debian: "
        f"postgresql-{major}-pgvector, or https://github.com/pgvector/pgvector) and run `sessionledger "
        "migrate`, or use SQLite (sqlite-vec)"
    )
    with pytest.raises(ExtensionMissing) as raised:
        _migrate_all(pg_url)
    assert str(raised.value) == line
    with pytest.raises(ValueError) as refused:
        PgVectorStore(pg_url, Fixed())
    assert str(refused.value) == line
    done = subprocess.run([CLI, "migrate", "--database-url", pg_url], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"no vector table: {line}"
    assert _vector_schema(pg_url) == (head_revision(), None, set(), set())
