"""A private PostgreSQL primary and hot standby for the read-replica tests: `initdb`, then
`pg_basebackup -R` for the standby, each on its own port and directory, both stopped and removed
afterwards. PostgreSQL refuses to run as root, so as root (CI) the clusters run as the `postgres`
user, through `runuser`."""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg

__all__ = ["ReplicatedPair", "start_pair"]


def _bin(name: str) -> str:
    """A PostgreSQL server program: on the PATH, else in Debian's versioned folder."""
    versioned = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    found = shutil.which(name) or (versioned[-1] if versioned else None)
    if found is None:
        raise FileNotFoundError(f"{name} not found: install the PostgreSQL server")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class Cluster:
    """One server of the pair: its data directory and port."""

    directory: Path
    port: int

    def admin_url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = self.directory.parent / f"{self.directory.name}.log"
        _run([_bin("pg_ctl"), "-D", str(self.directory), "-o", options, "-l", str(log), "-w", "start"])

    def stop(self) -> None:
        subprocess.run(
            _as_server_user([_bin("pg_ctl"), "-D", str(self.directory), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            check=False,
        )

    def execute(self, statement: str, database: str = "postgres") -> None:
        with psycopg.connect(self.admin_url(database), autocommit=True) as conn:
            conn.execute(statement.encode())

    def value(self, query: str, database: str = "postgres") -> object:
        with psycopg.connect(self.admin_url(database), autocommit=True) as conn:
            row = conn.execute(query.encode()).fetchone()
        return None if row is None else row[0]


def _run(command: list[str]) -> None:
    result = subprocess.run(_as_server_user(command), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr or result.stdout}")


@dataclass
class ReplicatedPair:
    """The primary and its standby, streaming; `close()` stops both and removes their directories."""

    root: Path
    primary: Cluster
    standby: Cluster

    def close(self) -> None:
        self.standby.stop()
        self.primary.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> None:
        """A database on the primary, waited for on the standby."""
        self.primary.execute(f'CREATE DATABASE "{name}"')
        self.wait_replayed()

    def drop_database(self, name: str) -> None:
        self.primary.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def wait_replayed(self) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        target = self.primary.value("SELECT pg_current_wal_insert_lsn()::text")
        self.standby.execute(
            "DO $$ BEGIN WHILE pg_last_wal_replay_lsn() < "
            f"'{target}'::pg_lsn LOOP PERFORM pg_sleep(0.01); END LOOP; END $$"
        )


def start_pair() -> ReplicatedPair:
    """Start a primary and a hot standby of it; stopped and removed at exit whatever happens."""
    root = Path(tempfile.mkdtemp(prefix="sl_replicas_"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    primary, standby = Cluster(root / "primary", _free_port()), Cluster(root / "standby", _free_port())
    pair = ReplicatedPair(root, primary, standby)
    atexit.register(pair.close)  # an interrupted run leaves no server behind either
    try:
        _run([_bin("initdb"), "-D", str(pair.primary.directory), "-U", "postgres", "--auth=trust", "-N"])
        pair.primary.start()
        _run(
            [
                _bin("pg_basebackup"),
                *("-h", "127.0.0.1", "-p", str(pair.primary.port), "-U", "postgres"),
                *("-D", str(pair.standby.directory), "-R", "-X", "stream"),
            ]
        )
        pair.standby.start()
    except BaseException:
        pair.close()
        raise
    return pair
