"""`sessionledger worker` and `sessionledger relay` run on the URLs their options give, whatever the
environment says: the options reach every process, the `all` role's children included."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa
from sessionledger.domain import SessionEvent, UserMessage
from sessionledger.infrastructure import open_service
from sessionledger.infrastructure.publisher import EventPublisher
from sessionledger.infrastructure.queue_names import QueueNames
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.stats import queue_depths

from tests.e2e.queue_deployment import RABBITMQ_URL, free_port, remove_queues, wait_for

pytestmark = [pytest.mark.rabbitmq, pytest.mark.slow]

CLI = str(Path(sys.executable).with_name("sessionledger"))


class Command:
    """One `sessionledger` process whose environment points elsewhere: a broker that refuses
    connections and another SQLite file. Stopped, with every process it started, at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.names = QueueNames(f"slcli-{uuid.uuid4().hex[:10]}", 2)
        self.cwd = tmp_path / "cwd"
        self.cwd.mkdir()
        self.elsewhere = tmp_path / "elsewhere.db"
        self.log = tmp_path / "command.log"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))},
            "SESSIONLEDGER_BROKER_URL": f"amqp://guest:guest@127.0.0.1:{free_port()}//",
            "SESSIONLEDGER_DATABASE_URL": f"sqlite:///{self.elsewhere}",
            "SESSIONLEDGER_QUEUE_PREFIX": self.names.prefix,  # what the options leave to the environment
            "SESSIONLEDGER_RELAY_INTERVAL": "0.1",
        }
        self.process: subprocess.Popen | None = None

    def start(self, *args: str) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [CLI, *args],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # one process group: nothing it starts outlives the test
            )

    def assert_running(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.log.read_text(errors="replace")
        return True

    def stop(self) -> None:
        """SIGTERM (the supervisor stops its children), then SIGKILL for whatever is still alive."""
        if self.process is None:
            return
        try:
            family = [psutil.Process(self.process.pid), *psutil.Process(self.process.pid).children(True)]
        except psutil.NoSuchProcess:
            family = []
        self.process.send_signal(signal.SIGTERM)
        psutil.wait_procs(family, timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def assert_nothing_elsewhere(self) -> None:
        assert not self.elsewhere.exists(), "the environment's database was used"
        assert not (self.cwd / "sessionledger.db").exists(), "the embedded default was used"


@pytest.fixture
def command(tmp_path) -> Iterator[Command]:
    command = Command(tmp_path)
    try:
        yield command
    finally:
        command.stop()
        remove_queues(RABBITMQ_URL, command.names)


@pytest.mark.postgres
def test_worker_stores_what_the_given_broker_delivers_in_the_given_database(command, pg_url):
    with open_service(pg_url) as service:
        session = service.create_session("agent").id
    command.start("worker", "--database-url", pg_url, "--broker-url", RABBITMQ_URL)  # all roles

    event = SessionEvent(session_id=session, message=UserMessage("stored where the options say"))
    with EventPublisher(RABBITMQ_URL, queue_prefix=command.names.prefix) as publisher:
        publisher.publish(event)
        assert publisher.flush(timeout=30)

    with open_service(pg_url) as service:

        def stored() -> bool:
            command.assert_running()
            return [e.id for e in service.get_events(session)] == [event.id]

        wait_for(stored, 120, "the event in the given database", interval=0.5)
        offset = sa.text("SELECT global_position FROM relay_offsets")
        with service.ledger.engine.connect() as conn:  # the relay child tails the same database
            wait_for(lambda: conn.execute(offset).scalar(), 60, "the relay's offset", interval=0.5)
    command.assert_nothing_elsewhere()


def test_relay_tails_the_given_database_and_wakes_through_the_given_broker(command, tmp_path):
    given = f"sqlite:///{tmp_path / 'given.db'}"
    with open_service(given) as service:
        session = service.create_session("agent").id
        service.append_message(session, UserMessage("wake the evaluators"))
        head = service.records(session)[-1].global_position
    command.start("relay", "--database-url", given, "--broker-url", RABBITMQ_URL)

    engine = sa.create_engine(given)
    try:

        def offset() -> int:
            command.assert_running()
            with engine.connect() as conn:
                return conn.execute(sa.text("SELECT global_position FROM relay_offsets")).scalar() or 0

        wait_for(lambda: offset() >= head, 60, "the relay's offset in the given database", interval=0.2)
    finally:
        engine.dispose()
    evaluations = (queue_depths(RABBITMQ_URL, command.names) or {})[command.names.evaluate]
    assert evaluations == 1, "the evaluate task went to the given broker"
    command.assert_nothing_elsewhere()


@pytest.mark.parametrize("name", ["worker", "relay"])
def test_without_a_broker_the_queue_commands_stop_with_a_clear_error(name, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = subprocess.run(
        [CLI, name, "--database-url", database], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "no broker: pass --broker-url or set SESSIONLEDGER_BROKER_URL" in result.stderr


def test_the_launcher_takes_the_settings_it_is_handed_on_standard_input_over_the_environment(tmp_path):
    """How `all` hands its settings to its children: the handed ones name no broker, the
    environment does, and the launcher refuses to start: it used the handed ones."""
    handed = Settings.model_validate({"database_url": f"sqlite:///{tmp_path / 'ledger.db'}"})  # no env
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONLEDGER_", "OPENAI_"))}
    env["SESSIONLEDGER_BROKER_URL"] = RABBITMQ_URL
    result = subprocess.run(
        [sys.executable, "-m", "sessionledger.workers.launch", "ingest", "--settings-from-stdin"],
        input=handed.model_dump_json(),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "needs a broker" in result.stderr


def test_relay_writes_signed_digests_on_a_schedule(command, tmp_path):
    """Signed with `--sign-key`, so they pass where the operator trusts that key (unsigned ones
    would be refused there)."""
    given = f"sqlite:///{tmp_path / 'given.db'}"
    digests = tmp_path / "digests"
    digests.mkdir()
    made = subprocess.run(
        [CLI, "keygen", "--out", str(tmp_path / "relay.pem")], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    with open_service(given) as service:
        session = service.create_session("agent").id
        service.append_message(session, UserMessage("before the relay"))
    command.start(
        "relay", "--database-url", given, "--broker-url", RABBITMQ_URL,
        "--digest-every", "0.3", "--digest-dir", str(digests), "--sign-key", str(tmp_path / "relay.pem"),
    )  # fmt: skip
    wait_for(
        lambda: command.assert_running() and len(list(digests.glob("digest-*.json"))) >= 1, 60, "a digest"
    )
    with open_service(given) as service:
        service.append_message(session, UserMessage("between two digests"))
    first = sorted(digests.glob("digest-*.json"))[0]

    def covers_the_append() -> bool:
        newest = sorted(digests.glob("digest-*.json"))[-1]
        return command.assert_running() and '"position":3' in newest.read_text()

    wait_for(covers_the_append, 60, "a digest holding the second append")
    command.stop()
    written = sorted(digests.glob("digest-*.json"))
    assert not list(digests.glob("*.partial"))
    every = [arg for path in written for arg in ("--digest", str(path))]
    checked = subprocess.run(
        [CLI, "verify", "--database-url", given, "--public-key", str(tmp_path / "relay.pem.pub"), *every],
        capture_output=True,
        text=True,
        timeout=120,
        env=command.env,
    )
    assert checked.returncode == 0, checked.stderr
    assert '"position":2' in first.read_text()


def test_a_bad_option_stops_the_whole_worker_before_any_role_starts(command):
    """`--partitions 7` on two partitions: one line, exit 2, and no role was ever started (the
    ingest child used to exit 2 and be restarted every second for ever)."""
    database = f"sqlite:///{command.cwd / 'ledger.db'}"
    command.start("worker", "--partitions", "7", "--database-url", database, "--broker-url", RABBITMQ_URL)
    assert command.process is not None
    assert command.process.wait(120) == 2
    said = command.log.read_text(errors="replace").strip().splitlines()
    assert said == ["error: partition range '7' is outside 0..1"], said  # no role said anything


def test_a_role_that_cannot_start_stops_the_supervisor_with_status_2(tmp_path):
    """The supervisor of `all`, handed what its parent would have refused: the ingest child exits
    2 on `--partitions 7`, and the supervisor stops the other children and exits 2."""
    from sessionledger.workers.launch import _supervise

    names = QueueNames(f"slcli-{uuid.uuid4().hex[:10]}", 2)
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'ledger.db'}",
        broker_url=RABBITMQ_URL,
        queue_prefix=names.prefix,
        partitions=names.partitions,
    )
    with open_service(settings.database_url):
        pass
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    # A session's servers (another test file's, on the same pytest worker) are children too.
    before = set(psutil.Process().children(recursive=True))
    try:
        assert _supervise(settings, "7", None, "INFO") == 2
        outlived = set(psutil.Process().children(recursive=True)) - before
        assert not outlived, f"a child outlived its supervisor: {outlived}"
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        for child in set(psutil.Process().children(recursive=True)) - before:
            child.kill()
        remove_queues(RABBITMQ_URL, names)


def test_relay_refuses_a_sign_key_it_cannot_use(tmp_path):
    """A sign key without a schedule, or one that is not an Ed25519 private key: one line, exit 2,
    before the relay starts."""
    given = f"sqlite:///{tmp_path / 'given.db'}"
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("hello\n")
    for extra, said in [
        (["--sign-key", str(not_a_key)], "--sign-key signs the digests of --digest-every"),
        (["--digest-every", "1", "--digest-dir", str(tmp_path), "--sign-key", str(not_a_key)],
         "is not a PEM private key"),
    ]:  # fmt: skip
        result = subprocess.run(
            [CLI, "relay", "--database-url", given, "--broker-url", RABBITMQ_URL, *extra],
            capture_output=True,
            text=True,
            timeout=120,
        )
        [line] = result.stderr.strip().splitlines()
        assert result.returncode == 2 and said in line, result.stderr
