"""A MariaDB/MySQL statement's text with its values written in, as PyMySQL's `cursor.execute`
writes it, made by the ledger itself for the append's packet (`driver.Packet` on the pool's
connections, `loop_mysql.py` on the event loop's).

PyMySQL (and asyncmy, its protocol compiled for asyncio) binds parameters on the client: each value becomes a
literal in the statement's text. Its string literal is one `str.translate` over a table whose
entries for the escaped characters are two characters long, which CPython runs a character at a
time from the first quote of a JSON payload on: about 14 ns per character, 30 us of a 2 KB
message's append and 80 us of a 5.7 KB ADK event's, as much client CPU as the rest of the driver's
work on the packet. `quoted` writes the same literal with one `str.replace` per escaped character
the text holds (each a C loop over the text; a character it lacks costs one search): a few us.

The text is PyMySQL's own, character for character (tests/adapters/test_mysql_text.py): strings
are escaped as its `escape_string` escapes them, integers, times and `None` written as it writes
them, and every other value (flags, numbers with a fraction) by the connection's own `escape`, as
is every value on a session in `NO_BACKSLASH_ESCAPES` mode, whose strings PyMySQL escapes otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

NO_BACKSLASH_ESCAPES = 0x200
"""The server status flag of a session whose `sql_mode` has `NO_BACKSLASH_ESCAPES` (the protocol's;
PyMySQL's `SERVER_STATUS_NO_BACKSLASH_ESCAPES`, not imported: `driver.py`, which every ledger
loads, imports this module, and only a MariaDB/MySQL ledger loads PyMySQL)."""

Params = Mapping[str, Any] | tuple[Any, ...]
"""A statement's parameters: by name (`%(name)s`) or in order (`%s`)."""

_BACKSLASHED = (
    ("\\", "\\\\"),  # first: the others add backslashes, which must stay as they are
    ("\0", "\\0"),
    ("\n", "\\n"),
    ("\r", "\\r"),
    ("\032", "\\Z"),
    ('"', '\\"'),
    ("'", "\\'"),
)
"""Each character PyMySQL's `converters.escape_string` escapes, and its escape."""


def quoted(text: str) -> str:
    """`text` as PyMySQL's string literal: quoted, each character of `_BACKSLASHED` escaped."""
    for char, escaped in _BACKSLASHED:
        if char in text:
            text = text.replace(char, escaped)
    return f"'{text}'"


def _null(_: None) -> str:
    return "NULL"


def _moment(value: datetime) -> str:
    """PyMySQL's literal of a `datetime`: its wall time without a time zone (PyMySQL drops it), the
    microseconds only when there are some (`isoformat` writes them so too)."""
    if value.tzinfo is not None:
        value = value.replace(tzinfo=None)
    return f"'{value.isoformat(' ')}'"


_WRITERS: dict[type, Callable[[Any], str]] = {str: quoted, int: str, type(None): _null, datetime: _moment}
"""How PyMySQL writes the ledger's common values, by exact type (a `bool` is no `int` here: the
connection writes it, as every type not named)."""


def statement_text(sql: str, params: Params, connection: Any) -> str:
    """`sql` with `params` written in, as PyMySQL's `cursor.execute(sql, params)` sends it; sent
    with `cursor.execute(text)` (no parameters: nothing is formatted again). `connection`: the
    PyMySQL or asyncmy connection it is sent on (its `escape`, and its server status, which says
    whether backslashes escape)."""
    escape = connection.escape
    if connection.server_status & NO_BACKSLASH_ESCAPES:
        writers: Mapping[type, Callable[[Any], str]] = {}
    else:
        writers = _WRITERS
    get = writers.get
    if isinstance(params, tuple):
        return sql % tuple([get(type(value), escape)(value) for value in params])
    return sql % {name: get(type(value), escape)(value) for name, value in params.items()}
