"""One classification of database and broker errors (`infrastructure/failures.py`): the workers'
operator messages and retries both use it, and `workers/failures.py` imports no driver of its own.
The errors are real ones, raised by the drivers and clients against closed ports and bad input."""

from __future__ import annotations

import ast
import sqlite3
import subprocess
import sys
from pathlib import Path

import kombu
import psycopg
import pytest
import redis
import sqlalchemy as sa
from sessionledger.infrastructure.failures import database_errors, database_unavailable, failed_system
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.failures import operator_message

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = {"sqlite3", "psycopg", "sqlalchemy", "amqp", "kombu", "redis"}
CLOSED = "127.0.0.1:1"  # nothing listens on port 1


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return {name.split(".")[0] for name in names}


def test_the_workers_operator_messages_import_no_driver_and_the_ledger_keeps_no_list_of_its_own():
    assert imported_modules(ROOT / "workers" / "failures.py") & DRIVERS == set()
    driver = (ROOT / "infrastructure" / "ledger" / "driver.py").read_text(encoding="utf-8")
    assert "OperationalError" not in driver and "database_unavailable" not in driver


def raised(action) -> BaseException:
    try:
        action()
    except BaseException as error:  # the error the driver or client raises, whatever it is
        return error
    raise AssertionError("nothing was raised")


def sqlite_locked(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        sqlite3.connect(path, timeout=0).execute("SELECT 1 FROM sqlite_master")
    finally:
        holder.close()


def sqlite_duplicate() -> None:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE t (k PRIMARY KEY)")
    connection.executemany("INSERT INTO t VALUES (?)", [(1,), (1,)])


def test_what_both_lists_covered_is_classified_once(tmp_path):
    settings = Settings(
        database_url=f"postgresql+psycopg://postgres@{CLOSED}/x", broker_url=f"redis://{CLOSED}/0"
    )
    unavailable = {
        "sqlite locked": raised(lambda: sqlite_locked(tmp_path)),
        "psycopg refused": raised(
            lambda: psycopg.connect(f"postgresql://postgres@{CLOSED}/x", connect_timeout=2)
        ),
        "sqlalchemy refused": raised(lambda: sa.create_engine(settings.database_url).connect()),
    }
    for what, error in unavailable.items():
        assert isinstance(error, database_unavailable()), what
        assert failed_system(error) == "database", what
        assert operator_message(error, settings).startswith(
            f"cannot use the database at {settings.database_url}: "
        )
    for what, error in {
        "sqlite constraint": raised(sqlite_duplicate),
        "unknown dialect": raised(lambda: sa.create_engine("nosuchdb://x")),
    }.items():
        assert failed_system(error) == "database" and not isinstance(error, database_unavailable()), what
        assert isinstance(error, database_errors()), what
    for what, error in {
        "redis refused": raised(lambda: redis.Redis.from_url(f"redis://{CLOSED}/0").ping()),
        "amqp refused": raised(
            lambda: kombu.Connection(f"amqp://guest:guest@{CLOSED}//").ensure_connection(max_retries=1)
        ),
    }.items():
        assert failed_system(error) == "broker" and not isinstance(error, database_errors()), what
        assert operator_message(error, settings).startswith(f"cannot use the broker at redis://{CLOSED}/0: ")
    for error in (ValueError("bad argument"), RuntimeError("a bug")):
        assert failed_system(error) is None


@pytest.mark.parametrize("error", [KeyError("k"), ZeroDivisionError()])
def test_a_bug_is_neither_systems_failure_and_keeps_its_traceback(error):
    assert failed_system(error) is None and operator_message(error, None) is None


def test_classifying_imports_no_driver_nor_broker_client_and_their_errors_are_still_theirs():
    """An error of psycopg's (or redis's, kombu's, py-amqp's) can only exist once its module is
    imported: until then the classification does without its classes (a command on a SQLite
    ledger never imports psycopg; one that failed on its database imports no broker client)."""
    code = (
        "import sqlite3, sys\n"
        "from sessionledger.infrastructure.failures import database_unavailable, failed_system\n"
        "assert failed_system(sqlite3.OperationalError('database is locked')) == 'database'\n"
        "assert failed_system(ValueError('a bug')) is None\n"
        "imported = {'psycopg', 'redis', 'kombu', 'amqp'} & {name.split('.')[0] for name in sys.modules}\n"
        "assert not imported, f'classifying imported {imported}'\n"
        "import psycopg, redis, kombu.exceptions, amqp.exceptions\n"
        "assert psycopg.OperationalError in database_unavailable()\n"
        "assert failed_system(psycopg.errors.UniqueViolation()) == 'database'\n"
        "assert failed_system(redis.exceptions.AuthenticationError('refused')) == 'broker'\n"
        "assert failed_system(kombu.exceptions.OperationalError('gone')) == 'broker'\n"
        "assert failed_system(amqp.exceptions.AccessRefused('no')) == 'broker'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
