"""The built wheel installs one `sessionledger` namespace, so a user's own `domain` package survives.

The wheel is built from a copy of the working tree and installed (not editable) into a fresh virtual
environment. Its third-party dependencies are the ones this test run already has: a `.pth` line
added after the install points the new environment at them (lines in a `.pth` file add a folder to
`sys.path` without running that folder's own `.pth` files, so the editable install of the checkout
stays out of it).
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import sessionledger

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
    (target,) = (home / "lib").glob("python3.*/site-packages")
    (target / "zz_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
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
