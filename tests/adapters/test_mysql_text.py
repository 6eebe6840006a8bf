"""`mysql_text.statement_text` writes exactly the text PyMySQL's `cursor.execute(sql, params)`
sends (its `mogrify`), whatever the strings hold, in either escaping mode of the session, on a
PyMySQL connection (the pool's) and on an asyncmy one (the event loop's, `loop_mysql.py`), whose
`escape` writes what the ledger's writers leave to the connection."""

from __future__ import annotations

import asyncio
import functools
from datetime import UTC, timedelta, timezone
from typing import Any

import asyncmy
import pymysql
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymysql.constants.SERVER_STATUS import SERVER_STATUS_NO_BACKSLASH_ESCAPES
from sessionledger.infrastructure.ledger.mysql_text import NO_BACKSLASH_ESCAPES, quoted, statement_text

ESCAPED = "\\\0\n\r\032\"'"
"""The characters PyMySQL's string literal escapes."""

texts = st.text(alphabet=st.sampled_from(ESCAPED) | st.characters(codec="utf-8"), max_size=60)
values = st.one_of(
    texts, st.integers(), st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
    st.datetimes(timezones=st.sampled_from([None, UTC, timezone(timedelta(hours=-5))])),
)  # fmt: skip


def _connection(status: int) -> pymysql.Connection:
    """A PyMySQL connection never opened, in the escaping mode `status` says."""
    connection = pymysql.connections.Connection(defer_connect=True, charset="utf8mb4")
    connection.server_status = status
    return connection


@functools.cache
def _asyncmy_connection(status: int) -> asyncmy.Connection:
    """An asyncmy connection never opened, in the escaping mode `status` says (made on a loop: it
    takes the running one)."""

    async def made() -> asyncmy.Connection:
        return asyncmy.Connection(charset="utf8mb4")

    connection = asyncio.run(made())
    connection.server_status = status
    return connection


def _sent_on(driver: str, status: int) -> Any:
    return _connection(status) if driver == "pymysql" else _asyncmy_connection(status)


DRIVERS = pytest.mark.parametrize("driver", ["pymysql", "asyncmy"])


def test_the_escaping_flag_is_the_protocols() -> None:
    assert NO_BACKSLASH_ESCAPES == SERVER_STATUS_NO_BACKSLASH_ESCAPES


@given(texts)
def test_a_string_is_quoted_as_pymysqls_escape_string_quotes_it(text: str) -> None:
    assert quoted(text) == f"'{pymysql.converters.escape_string(text)}'"


@DRIVERS
@given(st.dictionaries(st.sampled_from("abcdef"), values, min_size=1), st.booleans())
def test_named_parameters_give_pymysqls_text(
    driver: str, params: dict[str, Any], no_backslash_escapes: bool
) -> None:
    status = SERVER_STATUS_NO_BACKSLASH_ESCAPES if no_backslash_escapes else 0
    sql = " ".join(f"%({name})s, %({name})s" for name in params) + " 100%%"
    expected = _connection(status).cursor().mogrify(sql, params)
    assert statement_text(sql, params, _sent_on(driver, status)) == expected


@DRIVERS
@given(st.lists(values, min_size=1, max_size=8).map(tuple), st.booleans())
def test_positional_parameters_give_pymysqls_text(
    driver: str, params: tuple[Any, ...], no_backslash_escapes: bool
) -> None:
    status = SERVER_STATUS_NO_BACKSLASH_ESCAPES if no_backslash_escapes else 0
    sql = ", ".join("%s" for _ in params)
    expected = _connection(status).cursor().mogrify(sql, params)
    assert statement_text(sql, params, _sent_on(driver, status)) == expected
