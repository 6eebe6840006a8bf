"""A MariaDB ledger refuses, at open, a payload limit its server's `max_allowed_packet` cannot carry:
otherwise an event within the limit would fail inside the server instead of as a `ValueError`."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sessionledger.domain import UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.ledger.engine import create_ledger_engine


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
