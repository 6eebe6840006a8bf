"""The append packet's values are written into its text by the ledger (`mysql_text.py`), in the
session's escaping mode: with backslash escapes (the default) and without (`NO_BACKSLASH_ESCAPES`
in the session's `sql_mode`, here from the URL's `init_command`), the pool's append and the event
loop's store every quote and backslash as given."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import pytest
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_async_service, open_service

NO_BACKSLASH_ESCAPES = "SET sql_mode = 'NO_BACKSLASH_ESCAPES'"
TEXTS = [
    "it's",
    "100% %s %(x)s %%",
    'say "hi"',
    "a \\ backslash",
    "\\'",
    "''\\\\\"",
    "tab\tnew\nline\r\x1a",
    "é ✓ 🙂",
]


@pytest.fixture(params=["backslash escapes", "no backslash escapes"])
def url(request: pytest.FixtureRequest, mariadb_url: str) -> str:
    if request.param == "backslash escapes":
        return mariadb_url
    return f"{mariadb_url}?init_command={quote(NO_BACKSLASH_ESCAPES)}"


def test_the_pools_append_stores_the_text_as_given(url: str) -> None:
    with open_service(url) as service:
        session = service.create_session("alice").id
        for text in TEXTS:
            service.append_message(session, UserMessage(text))
        assert [m.text for m in service.get_messages(session)] == TEXTS


def test_the_event_loops_append_stores_the_text_as_given(url: str, pool_hops: list[object]) -> None:
    hops = pool_hops

    async def scenario() -> None:
        async with open_async_service(url) as service:
            session = (await service.create_session("alice")).id
            await service.append_message(session, UserMessage("warm"))  # the head, cached
            hops.clear()
            for text in TEXTS:
                await service.append_message(session, UserMessage(text))
            assert hops == [], "the appends were not sent from the loop"
            assert [m.text for m in await service.get_messages(session)] == ["warm", *TEXTS]

    asyncio.run(scenario())
