"""The built wheel installs one `sessionledger` namespace, so a user's own `domain` package survives,
and with only the dependencies it declares, every long-running command starts on either broker.

The wheel is built from a copy of the working tree and installed (not editable) into a fresh virtual
environment. Its dependencies are the ones it declares, transitively, taken from this test run's
environment, and nothing else: each of those distributions is linked into one folder, which a `.pth`
line puts on the new environment's `sys.path`, so a module the code imports without declaring it
fails here as it would for a user (lines in a `.pth` file add a folder to `sys.path` without running
that folder's own `.pth` files, so the editable install of the checkout stays out of it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
import venv
import zipfile
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from sessionledger.infrastructure.queue_names import QueueNames

import sessionledger
from tests.e2e.queue_deployment import RABBITMQ_URL, REDIS_URL, remove_queues

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "sessionledger", "domain", "infrastructure", "workers")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("sessionledger-*.whl")
    return built


def declared_dependencies(wheel: Path) -> list[metadata.Distribution]:
    """The installed distributions the wheel requires (no extra of its own), and theirs, transitively."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = HeaderParser().parsestr(archive.read(name).decode()).get_all("Requires-Dist") or []
    found: dict[str, metadata.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(Requirement(text), frozenset({""})) for text in requires]
    while todo:
        requirement, extras = todo.pop()
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e}) for e in extras):
            continue
        key = (canonicalize_name(requirement.name), frozenset({"", *requirement.extras}))
        if key in seen:
            continue
        seen.add(key)
        distribution = found.setdefault(key[0], metadata.distribution(requirement.name))
        todo += [(Requirement(text), key[1]) for text in distribution.requires or []]
    return list(found.values())


def link_distributions(distributions: list[metadata.Distribution], folder: Path) -> None:
    """Each distribution's top-level modules, packages and metadata linked into `folder`; a folder
    several distributions share (a namespace package) is made here and its entries linked."""
    for distribution in distributions:
        base = Path(str(distribution.locate_file("")))
        for file in distribution.files or []:
            parts = Path(file).parts
            if parts[0] == ".." or parts[0].endswith(".pth") or parts[0] == "__pycache__":
                continue
            top = base / parts[0]
            if top.is_dir() and len(parts) > 2 and not (top / "__init__.py").exists():
                (folder / parts[0]).mkdir(exist_ok=True)
                link, target = folder / parts[0] / parts[1], top / parts[1]
            else:
                link, target = folder / parts[0], top
            if not link.exists():
                link.symlink_to(target)


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    dependencies = tmp_path_factory.mktemp("dependencies")
    link_distributions(declared_dependencies(wheel), dependencies)
    (target,) = (home / "lib").glob("python3.*/site-packages")
    (target / "zz_test_dependencies.pth").write_text(f"{dependencies}\n")
    return python


def test_the_wheel_holds_only_the_sessionledger_namespace(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.startswith("sessionledger-")}
    assert top == {"sessionledger"}
    assert "sessionledger/py.typed" in names
    assert "sessionledger/infrastructure/ledger/migrations/versions/0001_initial.py" in names
    assert any(name.endswith("/licenses/LICENSE") for name in names)


def test_a_users_own_domain_package_and_ours_live_side_by_side(environment: Path, tmp_path: Path):
    (tmp_path / "domain").mkdir()
    (tmp_path / "domain" / "__init__.py").write_text("WHO = 'the application'\n")
    script = (
        "import domain, sessionledger, sessionledger.domain, sessionledger.workers.cli\n"
        "from sessionledger import open_service, UserMessage\n"
        "assert domain.WHO == 'the application'\n"
        "assert sessionledger.domain.__file__.startswith(sys.prefix), sessionledger.domain.__file__\n"
        "with open_service('memory://') as service:\n"
        "    session = service.create_session('u')\n"
        "    service.append_message(session.id, UserMessage('hi'))\n"
        "    print(sessionledger.__version__, len(service.get_messages(session.id)))\n"
    )
    done = subprocess.run(
        [str(environment), "-c", "import sys\n" + script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [sessionledger.__version__, "1"]


def test_the_installed_command_prints_its_version(environment: Path):
    done = subprocess.run(
        [str(environment.parent / "sessionledger"), "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"sessionledger {sessionledger.__version__}"


BROKERS = {"rabbitmq": RABBITMQ_URL, "redis": REDIS_URL}
LONG_RUNNING = {
    # `worker` runs every role (ingest, tasks and relay) as `python -m sessionledger.workers.launch`
    # children: two Celery workers that log "ready.", and a relay that logs it leads
    "worker": (
        ["worker", "--loglevel=INFO"],
        lambda log: log.count("ready.") >= 2 and "relay leading" in log,
    ),
    "relay": (["relay"], lambda log: "relay leading" in log),
}


@pytest.mark.parametrize("broker", sorted(BROKERS))
def test_every_long_running_command_starts_from_the_wheel_alone_and_stops_on_sigterm(
    environment: Path, tmp_path: Path, broker: str
):
    """Both commands at once, on one broker: up until they say they are ready, then SIGTERM."""
    names = QueueNames(f"sltest-{uuid.uuid4().hex[:10]}", 2)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SESSIONLEDGER_")}
    env |= {
        "SESSIONLEDGER_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}",
        "SESSIONLEDGER_BROKER_URL": BROKERS[broker],
        "SESSIONLEDGER_QUEUE_PREFIX": names.prefix,
        "SESSIONLEDGER_PARTITIONS": str(names.partitions),
        "SESSIONLEDGER_LOG_FORMAT": "text",
    }
    command = environment.parent / "sessionledger"
    logs = {name: tmp_path / f"{name}.log" for name in LONG_RUNNING}
    running: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, (arguments, _) in LONG_RUNNING.items():
            with logs[name].open("wb") as log:
                running[name] = subprocess.Popen(
                    [str(command), *arguments], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT
                )
        deadline = time.monotonic() + 240  # a loaded machine: the start of one command took 45 s
        waiting = set(LONG_RUNNING)
        while waiting and time.monotonic() < deadline:
            for name in list(waiting):
                text = logs[name].read_text(errors="replace")
                assert running[name].poll() is None, f"{name} exited early:\n{text[-3000:]}"
                if LONG_RUNNING[name][1](text):
                    waiting.discard(name)
            time.sleep(0.5)
        assert not waiting, f"not ready: {waiting}\n" + "\n".join(
            logs[n].read_text()[-2000:] for n in waiting
        )
        for process in running.values():
            process.send_signal(signal.SIGTERM)
        for name, process in running.items():
            assert process.wait(90) == 0, f"{name} exited with {process.returncode}"
        for name, log in logs.items():
            text = log.read_text(errors="replace")
            for sign in ("Traceback", "ModuleNotFoundError", "exited with"):
                assert sign not in text, f"{name}:\n{text[-3000:]}"
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        remove_queues(BROKERS[broker], names)
