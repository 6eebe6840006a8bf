"""MariaDB's one-event append is the call of a stored procedure of the ledger's own
(`driver.Procedure`): made when a ledger is opened to write, called by the pool's appends and the
event loop's, and signalling, not storing, when the head it was given had moved."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pymysql
import pytest
import sqlalchemy as sa
from sessionledger.domain import SessionNotFound, UserMessage
from sessionledger.infrastructure import audit, open_async_service, open_service
from sessionledger.infrastructure.ledger import statements
from sessionledger.infrastructure.ledger.driver import DriverStatement, Procedure
from sessionledger.infrastructure.ledger.schema import mysql_collation
from sqlalchemy.dialects.mysql import pymysql as mysql_pymysql

from tests.conftest import MARIADB_ADMIN


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.exec_driver_sql(sql)]
    finally:
        engine.dispose()


def _routines(url: str) -> list[tuple[object, ...]]:
    """The database's procedures: name and security type."""
    return _rows(
        url,
        "SELECT ROUTINE_NAME, SECURITY_TYPE FROM information_schema.ROUTINES"
        " WHERE ROUTINE_SCHEMA = DATABASE() ORDER BY ROUTINE_NAME",
    )


def _calls(url: str) -> int:
    """The server's count of CALL statements so far (every connection's)."""
    [(_, count)] = _rows(url, "SHOW GLOBAL STATUS LIKE 'Com_call_procedure'")
    return int(str(count))


def test_a_ledger_opened_to_write_has_its_append_procedures_once(mariadb_url: str) -> None:
    with open_service(mariadb_url):
        made = _routines(mariadb_url)
    with open_service(mariadb_url):  # found, not made again
        assert _routines(mariadb_url) == made
    names = [str(name).rsplit("_", 1)[0] for name, _ in made]
    assert names == ["sessionledger_append", "sessionledger_token_append"]
    assert {security for _, security in made} == {"INVOKER"}


def test_the_pools_and_the_loops_one_event_appends_call_the_procedure(mariadb_url: str) -> None:
    with open_service(mariadb_url) as service:
        session = service.create_session("alice").id
        service.append_message(session, UserMessage("first"))  # reads the head, then calls
        before = _calls(mariadb_url)
        for n in range(5):
            service.append_message(session, UserMessage(f"pool {n}"))
        assert _calls(mariadb_url) - before >= 5

    async def on_the_loop() -> None:
        async with open_async_service(mariadb_url) as service:
            await service.append_message(session, UserMessage("warm"))
            before = _calls(mariadb_url)
            for n in range(5):
                await service.append_message(session, UserMessage(f"loop {n} 🙂"))
            assert _calls(mariadb_url) - before >= 5
            texts = [m.text for m in await service.get_messages(session)]
            assert texts[-5:] == [f"loop {n} 🙂" for n in range(5)]

    asyncio.run(on_the_loop())
    with open_service(mariadb_url) as service:
        assert audit.verify(service, session).ok


def test_a_call_from_a_head_that_moved_stores_nothing_and_the_append_is_made_again(mariadb_url: str) -> None:
    with open_service(mariadb_url) as first, open_service(mariadb_url) as second:
        session = first.create_session("alice").id
        first.append_message(session, UserMessage("a"))  # `first` caches the head
        second.append_message(session, UserMessage("b"))  # and `second` moves it
        first.append_message(session, UserMessage("c"))  # the call signals; re-read, called again
        assert [m.text for m in second.get_messages(session)] == ["a", "b", "c"]
        assert audit.verify(second, session).ok
        second.delete_session(session)
        with pytest.raises(SessionNotFound):
            first.append_message(session, UserMessage("after the deletion"))


def test_the_procedure_is_named_after_what_it_runs() -> None:
    dialect = mysql_pymysql.dialect()
    row = DriverStatement(statements.INSERT_ROW, dialect, statements.ROW_COLUMNS)

    def made(head_moved: sa.Update) -> Procedure:
        return Procedure("p", [DriverStatement(head_moved, dialect), row], dialect, "utf8mb4_nopad_bin")

    common, token = made(statements.MOVE_HEAD), made(statements.move_head(statements.TOKEN_LIVE))
    assert made(statements.MOVE_HEAD).name == common.name != token.name
    assert "SQL SECURITY INVOKER" in common.created
    assert "p_payload LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin" in common.created.replace(
        "TEXT(4294967295)", "LONGTEXT"
    )
    assert common.sql.startswith(f"CALL {common.name}(")


def test_a_procedure_made_meanwhile_by_another_process_is_as_good(mariadb_url: str) -> None:
    """Two processes opening a new ledger at once both find the procedure missing; the second's
    CREATE then meets the first's procedure, which it takes."""
    with open_service(mariadb_url):
        pass  # the procedures exist now
    engine = sa.create_engine(mariadb_url)
    with engine.connect():  # the dialect learns the server: its reserved words, MariaDB's collation
        dialect = engine.dialect
    head_moved = DriverStatement(statements.MOVE_HEAD, dialect)
    row = DriverStatement(statements.INSERT_ROW, dialect, statements.ROW_COLUMNS)
    procedure = Procedure("sessionledger_append", [head_moved, row], dialect, mysql_collation(dialect))

    class MissedIt:
        """A connection whose look for the procedure came before the other process made it."""

        def __init__(self, connection: sa.Connection) -> None:
            self.connection = connection

        def exec_driver_sql(self, sql: str, *args: object) -> object:
            if sql.startswith("SELECT 1 FROM information_schema.ROUTINES"):
                return self.connection.exec_driver_sql("SELECT 1 FROM DUAL WHERE FALSE")
            return self.connection.exec_driver_sql(sql, *args)

    try:
        assert procedure.name in {name for name, _ in _routines(mariadb_url)}
        with engine.begin() as connection:
            procedure.create(MissedIt(connection))  # type: ignore[arg-type]  # a connection's stand-in
        with engine.begin() as connection, pytest.raises(sa.exc.DBAPIError):
            connection.exec_driver_sql(procedure.created.replace("%", "%%"))  # not swallowed unasked
    finally:
        engine.dispose()


@pytest.fixture
def routine_less_url(mariadb_url: str) -> Iterator[str]:
    """`mariadb_url` through an account of its own holding every privilege on the database that
    the ledger uses but `CREATE ROUTINE` (dropped afterwards, an interrupted run's too)."""
    user, address = MARIADB_ADMIN.rsplit("@", 1)
    host, port = address.rsplit(":", 1)
    database = mariadb_url.rsplit("/", 1)[1]
    account, password = f"sl_test_{uuid.uuid4().hex[:12]}", uuid.uuid4().hex

    def admin(sql: str) -> None:
        with pymysql.connect(host=host, port=int(port), user=user, autocommit=True) as conn:
            conn.cursor().execute(sql)

    admin(f"CREATE USER '{account}'@'%' IDENTIFIED BY '{password}'")
    try:
        admin(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, TRIGGER, REFERENCES,"
            f" LOCK TABLES, CREATE TEMPORARY TABLES, EXECUTE ON `{database}`.* TO '{account}'@'%'"
        )
        yield f"mysql+pymysql://{account}:{password}@{address}/{database}"
    finally:
        admin(f"DROP USER IF EXISTS '{account}'@'%'")


def test_an_account_that_may_not_create_the_procedures_is_told_what_to_grant(
    routine_less_url: str, mariadb_url: str
) -> None:
    """One line naming the privilege (not the procedure's text); once an account that may has
    opened the ledger (`sessionledger migrate`), the first account appends through the procedures."""
    with pytest.raises(ValueError) as refused:
        open_service(routine_less_url)
    message = str(refused.value)
    assert "\n" not in message and "CREATE ROUTINE" in message and "sessionledger migrate" in message
    assert "BEGIN" not in message, "the procedure's definition is not the operator's to read"
    assert _routines(mariadb_url) == []
    open_service(mariadb_url).close()  # the operator's migrate, as an account that may
    with open_service(routine_less_url) as service:
        session = service.create_session("alice").id
        before = _calls(mariadb_url)
        for n in range(3):
            service.append_message(session, UserMessage(f"a lapwing, {n}"))
        assert _calls(mariadb_url) - before >= 2  # the first append reads the head, then calls
        assert audit.verify(service, session).ok
