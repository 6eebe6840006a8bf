"""No password in a message: database and broker URLs masked wherever they appear, the library's
own errors about a URL included, as SQLAlchemy and kombu themselves would read the password."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.bootstrap import check_database_url
from sessionledger.infrastructure.ledger.engine import ledger_url
from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import check_broker
from sessionledger.workers.metrics import JsonFormatter

SECRET = "pw-5ecret"

URLS = [
    f"postgresql+psycopg://user:{SECRET}@db.example:5432/ledger",
    f"postgresql://user:{SECRET}@db.example/ledger?sslmode=require",
    f"postgresql+psycopg://user:{SECRET}@db.example:notaport/ledger",
    f"mysql://user:{SECRET}@db.example/ledger",
    f"amqp://guest:{SECRET}@rabbit.example:5672//",
    f"amqp://guest:{SECRET}@rabbit.example:5672/vhost",
    f"redis://:{SECRET}@redis.example:6379/0",
    f"rediss://default:{SECRET}@redis.example:6380/1",
    f"postgresql+psycopg://user:{SECRET}@with@at@db.example/ledger",
    f"postgresql+psycopg://user:{SECRET}/slash@db.example/ledger",
]


@pytest.mark.parametrize("url", URLS)
def test_the_password_is_masked_and_the_rest_kept(url: str) -> None:
    scheme_and_user, host_and_rest = url.split(SECRET)[0], url.rsplit("@", 1)[1]
    assert hide_passwords(url) == f"{scheme_and_user}***@{host_and_rest}"


@pytest.mark.parametrize("url", [u for u in URLS if "notaport" not in u])
def test_the_password_the_libraries_read_is_masked_too(url: str) -> None:
    """Whatever SQLAlchemy or urllib (kombu's parser) take for the password never shows."""
    masked = hide_passwords(url)
    for password in (sa.make_url(url).password, urlsplit(url).password):
        if password:
            assert str(password) not in masked


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (f"postgresql+psycopg://u@h:1/db?password={SECRET}", "postgresql+psycopg://u@h:1/db?password=***"),
        (
            f"postgresql://u@h/db?sslmode=require&PASSWORD={SECRET}&x=1",
            "postgresql://u@h/db?sslmode=require&PASSWORD=***&x=1",
        ),
        (f"redis://h:6379/0?password={SECRET}", "redis://h:6379/0?password=***"),
        ("postgresql://u@h/db?passwordless=yes", "postgresql://u@h/db?passwordless=yes"),
    ],
)
def test_a_password_given_in_the_query_string_is_masked(url: str, masked: str) -> None:
    """Masked up to the next space, quote, `&` or `#`: a password may hold any other character."""
    assert hide_passwords(f"cannot use the database at '{url}' (refused)") == (
        f"cannot use the database at '{masked}' (refused)"
    )


def test_urls_inside_a_message_are_masked_and_urls_without_a_password_are_left_alone() -> None:
    message = (
        f"error: cannot open 'mysql://u:{SECRET}@h/db': unsupported URL \"mysql://u:{SECRET}@h/db\"; "
        "see sqlite:///./sessionledger.db or postgresql://u@h:5432/db, mail admin@example.org"
    )
    masked = hide_passwords(message)
    assert SECRET not in masked
    assert masked.count("mysql://u:***@h/db") == 2
    assert "sqlite:///./sessionledger.db" in masked and "postgresql://u@h:5432/db" in masked
    assert "admin@example.org" in masked


@pytest.mark.parametrize(
    "url",
    [
        "notaurl",
        "sqlite://relative.db",
        f"postgresql+psycopg://u:{SECRET}@h:notaport/db",
        f"oracle://u:{SECRET}@h/db",
        f"postgresql+asyncpg://u:{SECRET}@h/db",
    ],
)
def test_a_url_that_names_no_ledger_is_a_value_error_that_shows_no_password(url: str) -> None:
    with pytest.raises(ValueError) as refused:
        ledger_url(url)
    assert SECRET not in str(refused.value)
    with pytest.raises(ValueError) as refused:
        open_service(url)
    assert SECRET not in str(refused.value) and "use postgresql+psycopg://" in str(refused.value)


def test_a_sqlite_file_in_a_missing_directory_is_refused_before_connecting(tmp_path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(ValueError, match="no directory"):
        check_database_url(Settings(database_url=f"sqlite:///{missing / 'ledger.db'}"))
    assert not missing.exists()
    check_database_url(Settings(database_url=f"sqlite:///{tmp_path / 'ledger.db'}"))
    check_database_url(Settings(database_url="memory://"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["notaurl", f"nosuch://u:{SECRET}@h//", f"amqp://u:{SECRET}@h:notaport//"])
def test_a_broker_url_no_transport_takes_is_a_value_error_that_shows_no_password(url: str) -> None:
    with pytest.raises(ValueError, match="broker URL") as refused:
        check_broker(url)
    assert SECRET not in str(refused.value)


def test_json_log_lines_show_no_password() -> None:
    record = logging.LogRecord(
        "sessionledger", logging.ERROR, __file__, 1, "cannot reach %s", (f"amqp://g:{SECRET}@h//",), None
    )
    record.fields = {"broker": f"redis://:{SECRET}@h:6379/0"}
    line = JsonFormatter().format(record)
    assert SECRET not in line and "amqp://g:***@h//" in line and "redis://:***@h:6379/0" in line
