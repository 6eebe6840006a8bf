"""A MariaDB ledger refuses, at open, a payload limit its server's `max_allowed_packet` cannot carry:
otherwise an event within the limit would fail inside the server instead of as a `ValueError`."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_async_service, open_service
from sessionledger.infrastructure.ledger.engine import create_ledger_engine
from sessionledger.infrastructure.ledger.mysql import ROW_ROOM


def _packet(url: str) -> int:
    engine = create_ledger_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
    finally:
        engine.dispose()


def test_a_payload_limit_past_the_servers_packet_is_refused_before_anything_is_made(mariadb_url: str) -> None:
    too_large = _packet(mariadb_url)  # escaped, a payload of this size could take twice the packet
    with pytest.raises(ValueError, match="max_allowed_packet") as refused:
        open_service(mariadb_url, max_payload_bytes=too_large)
    assert "\n" not in str(refused.value)
    engine = create_ledger_engine(mariadb_url)
    try:
        assert sa.inspect(engine).get_table_names() == []  # no schema was written
    finally:
        engine.dispose()


def test_a_limit_that_fits_stores_payloads_at_escapings_worst(mariadb_url: str) -> None:
    limit = 256 * 1024
    with open_service(mariadb_url, max_payload_bytes=limit) as service:
        session = service.create_session("alice").id
        text = '"\\' * (limit // 8)  # quotes and backslashes: the text PyMySQL's escaping doubles
        service.append_message(session, UserMessage(text))
        assert service.get_messages(session)[0].text == text
        with pytest.raises(ValueError):
            service.append_message(session, UserMessage("x" * (limit + 1)))


def test_the_event_loops_append_carries_the_largest_payload_the_limit_allows_and_refuses_more(
    mariadb_url: str, pool_hops: list[object]
) -> None:
    """The append sent from the event loop (`loop_mysql.py`) is the synchronous path's packet:
    at the largest limit `check_payload_room` lets a ledger open with, a payload at escaping's worst
    is stored from the loop (no thread), and one over the limit is a one-line `ValueError` before
    anything is sent."""
    limit = (_packet(mariadb_url) - ROW_ROOM) // 2
    hops = pool_hops

    async def scenario() -> None:
        async with open_async_service(mariadb_url, max_payload_bytes=limit) as service:
            session = (await service.create_session("alice")).id
            await service.append_message(session, UserMessage("warm"))  # the head, cached
            text = '"\\' * ((limit - 4096) // 4)  # 4 bytes in JSON, 8 once escaped in the statement
            hops.clear()
            await service.append_message(session, UserMessage(text))
            assert hops == [], "the append was not sent from the loop"
            version = await service.event_version(session)
            with pytest.raises(ValueError, match="payload limit") as refused:
                await service.append_message(session, UserMessage("x" * (limit + 1)))
            assert "\n" not in str(refused.value)
            assert await service.event_version(session) == version
            assert [m.text for m in await service.get_messages(session)] == ["warm", text]

    asyncio.run(scenario())
