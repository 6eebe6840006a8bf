"""The import rules docs/architecture.md states are checked by tools, and the checks can fail.

import-linter holds the package to the contracts in pyproject.toml (`make lint` and `make test` run
them through .ci/imports); here each contract is shown to pass on the package as it is and to fail,
naming itself, on a copy of it with one planted import. The copy is a tree of links built in a
temporary directory (.ci/link-tree) in which one folder is a directory of links plus the planted
module: the checkout is never touched. tests/unit's own rule, that it tests the domain alone, is
checked on the test files' imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = {
    contract["id"]: contract["name"]
    for contract in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]["contracts"]
}

# contract id -> (folder, {planted module: its text}); each plants one breach of that contract
BREACHES = {
    "domain-pure": ("domain", {"planted.py": "from sessionledger.infrastructure import settings\n"}),
    "infrastructure-not-workers": ("infrastructure", {"planted.py": "import sessionledger.workers.relay\n"}),
    "workers-through-ports": (
        "workers",
        {"planted.py": "from sessionledger.infrastructure.ledger import sql\n"},
    ),
    "domain-acyclic": (
        "domain",
        {
            "planted_a.py": "from sessionledger.domain import planted_b\n",
            "planted_b.py": "from sessionledger.domain import planted_a\n",
        },
    ),
}
# a library the domain may not import, planted the same way
LIBRARY_BREACH = ("domain", {"planted.py": "import sqlalchemy\n"})


def link_tree(where: Path, folder: str | None = None, planted: dict[str, str] | None = None) -> Path:
    """The package as installed, as links to the checkout; `folder`, if given, a directory of links
    to its files with the `planted` modules beside them."""
    subprocess.run(["bash", str(ROOT / ".ci" / "link-tree"), str(where)], check=True)
    if folder is not None:
        target = where / "sessionledger" / folder
        target.unlink()
        target.mkdir()
        for entry in (ROOT / folder).iterdir():
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)
        for name, text in (planted or {}).items():
            (target / name).write_text(text, encoding="utf-8")
    return where


def lint_imports(tree: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """lint-imports on the tree (run from it: lint-imports puts its working directory on sys.path)."""
    chosen = [argument for contract in contracts for argument in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", *chosen, str(ROOT / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def flat(output: str) -> str:
    """lint-imports wraps long lines at 80 columns."""
    return " ".join(output.split())


def test_every_contract_has_a_planted_breach():
    assert set(BREACHES) == set(CONTRACTS)


@pytest.fixture(scope="module")
def clean_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    return flat(lint_imports(link_tree(tmp_path_factory.mktemp("clean") / "tree")).stdout)


@pytest.mark.parametrize("contract", sorted(BREACHES))
def test_the_package_keeps_the_contract(clean_report: str, contract: str):
    assert f"{flat(CONTRACTS[contract])} KEPT" in clean_report, clean_report


@pytest.mark.parametrize("contract", sorted(BREACHES))
def test_a_planted_import_breaks_the_contract(tmp_path: Path, contract: str):
    folder, planted = BREACHES[contract]
    result = lint_imports(link_tree(tmp_path / "tree", folder, planted), contract)
    report = flat(result.stdout)
    assert result.returncode == 1, report
    assert f"{flat(CONTRACTS[contract])} BROKEN" in report
    assert "planted" in report  # the breach reported is the planted one


def test_the_domain_imports_no_database_library(tmp_path: Path):
    result = lint_imports(link_tree(tmp_path / "tree", *LIBRARY_BREACH), "domain-pure")
    report = flat(result.stdout)
    assert result.returncode == 1, report
    assert "sessionledger.domain.planted -> sqlalchemy" in report


def imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def outside_the_domain(path: Path, seen: set[Path]) -> set[str]:
    """What the file imports of the package beyond the domain, itself or through the test modules
    it imports (helpers and fakes are held to the same rule)."""
    found: set[str] = set()
    for name in imported_names(path):
        if name == "sessionledger" or (
            name.startswith("sessionledger.") and not name.startswith("sessionledger.domain")
        ):
            found.add(name)
        elif name.startswith("tests."):
            module = ROOT.joinpath(*name.split("."))
            helper = module / "__init__.py" if module.is_dir() else module.with_suffix(".py")
            if helper not in seen:
                seen.add(helper)
                found |= {f"{name}: {inner}" for inner in outside_the_domain(helper, seen)}
    return found


def test_unit_tests_import_the_domain_alone():
    """docs/architecture.md: tests/unit is the domain's (adapters' tests without services are in
    tests/adapters)."""
    breaches = {
        path.name: sorted(found)
        for path in sorted((ROOT / "tests" / "unit").glob("*.py"))
        if (found := outside_the_domain(path, set()))
    }
    assert breaches == {}
