"""The MariaDB and MySQL side of the ledger's engine (PyMySQL): imported only when such a URL is
opened, so that a command on another ledger loads neither PyMySQL nor SQLAlchemy's MySQL dialect.

PyMySQL is pure Python: a fresh machine installs it with no compiler and no libmariadb-dev, which
mysqlclient and the MariaDB connector need (neither ships manylinux wheels)."""

from __future__ import annotations

from functools import partial
from typing import Any

import sqlalchemy as sa
from pymysql.constants import CLIENT
from sessionledger.infrastructure.ledger.driver import check_pooled_connections, server_spoke
from sessionledger.infrastructure.ledger.engine import milliseconds
from sqlalchemy import event


def mysql_engine(url: sa.URL, pool_size: int, statement_timeout: float, read_only: bool) -> sa.Engine:
    """`create_ledger_engine` for a MariaDB or MySQL URL (`engine.py`): `utf8mb4` on the wire,
    READ COMMITTED as on PostgreSQL (InnoDB's REPEATABLE READ takes gap locks that turn concurrent
    appends into deadlocks), and a pooled connection the server closed, or that stops answering
    after idling, replaced at checkout (`driver.check_pooled_connections`)."""
    engine = sa.create_engine(
        # multi-statement packets: the one-round-trip append (`driver.Packet`); every statement's
        # values are bound parameters, never SQL text
        url.update_query_dict({"charset": "utf8mb4", "client_flag": str(CLIENT.MULTI_STATEMENTS)}),
        pool_size=pool_size,
        max_overflow=pool_size * 2,
        isolation_level="READ COMMITTED",
    )
    check_pooled_connections(engine, _ping, _closed)
    event.listen(engine, "connect", partial(_configure, statement_timeout, read_only))
    return engine


ROW_ROOM = 64 * 1024
"""Bytes of a ledger row's statement beside its payload: ids, hashes, times, the SQL itself."""


def check_payload_room(engine: sa.Engine, max_payload_bytes: int) -> None:
    """`ValueError` when the server's `max_allowed_packet` could not carry a payload as large as
    the settings allow: PyMySQL sends the escaped text inside the statement (a payload of quotes
    and backslashes doubles), so without this check such an event would reach the server and fail
    there, where every other backend refuses it with a `ValueError` before anything is written."""
    with engine.connect() as connection:
        packet = int(connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
    if 2 * max_payload_bytes + ROW_ROOM > packet:
        raise ValueError(
            f"SESSIONLEDGER_MAX_PAYLOAD_BYTES is {max_payload_bytes:,} bytes, but this server's "
            f"max_allowed_packet ({packet:,} bytes) carries payloads of up to "
            f"{max(0, (packet - ROW_ROOM) // 2):,}: raise max_allowed_packet or lower the payload limit"
        )


def _ping(dbapi_connection: Any) -> None:
    """PyMySQL's ping (a COM_PING round trip); `DisconnectionError` when the connection is gone."""
    try:
        dbapi_connection.ping(reconnect=False)
    except Exception as error:
        raise sa.exc.DisconnectionError(str(error)) from error


def _closed(dbapi_connection: Any) -> bool:
    """Whether the server closed the connection: PyMySQL closed its socket, or the server's goodbye
    waits on it (`driver.server_spoke`). PyMySQL names its socket only privately (`_sock`)."""
    sock = dbapi_connection._sock
    return sock is None or server_spoke(sock.fileno())


def session_settings(server_info: str, statement_timeout: float) -> str:
    """The `SET` every ledger connection runs first (the pool's, and the event loop's own in
    `loop_mysql.py`): UTC as the session time zone (`NOW()` and the like; the ledger binds UTC
    itself), strict SQL (a value that does not fit is an error, never silently cut), and the
    statement timeout: MariaDB's `max_statement_time` covers every statement, MySQL's
    `max_execution_time` SELECTs. `server_info`: the server's version string, which names MariaDB."""
    timeout = (
        f"max_statement_time = {statement_timeout:.3f}"
        if "mariadb" in server_info.lower()
        else f"max_execution_time = {milliseconds(statement_timeout)}"
    )
    return (
        "SET time_zone = '+00:00', "
        "sql_mode = CONCAT_WS(',', @@sql_mode, 'STRICT_TRANS_TABLES', 'NO_ENGINE_SUBSTITUTION'), " + timeout
    )


def _configure(statement_timeout: float, read_only: bool, connection: Any, _record: Any) -> None:
    """`session_settings`, and a read-only session for a reader."""
    with connection.cursor() as cursor:
        cursor.execute(session_settings(connection.get_server_info(), statement_timeout))
        if read_only:
            cursor.execute("SET SESSION TRANSACTION READ ONLY")
    connection.commit()
