"""docs/architecture.md's module map lists exactly the modules the package has, each once."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("sessionledger", "domain", "infrastructure", "workers")
TOP = re.compile(r"^(\w+)/\s")
MODULE = re.compile(r"^  ([\w/]+\.py)\s")


def mapped_modules() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Packages and imports", 1)[1].split("```", 2)[1]
    found: list[str] = []
    folder = None
    for line in block.splitlines():
        if top := TOP.match(line):
            folder = top.group(1) if top.group(1) in FOLDERS else None
        elif folder and (module := MODULE.match(line)):
            found.append(f"{folder}/{module.group(1)}")
    return found


def package_modules() -> set[str]:
    tracked = subprocess.run(
        ["git", "ls-files", *FOLDERS], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    untracked = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", *FOLDERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        name
        for name in (*tracked, *untracked)
        if name.endswith(".py")
        and (ROOT / name).exists()
        and not (name.endswith("/__init__.py") and not name.startswith("sessionledger/"))
        and "/versions/" not in name  # the migrations' revisions (ledger/migrations/, and its vectors/)
    }


def test_every_module_is_on_the_map_once_and_the_map_names_no_other():
    mapped = mapped_modules()
    assert len(mapped) == len(set(mapped)), "listed twice: " + ", ".join(
        sorted({m for m in mapped if mapped.count(m) > 1})
    )
    missing = package_modules() - set(mapped)
    extra = set(mapped) - package_modules()
    assert not missing, "not on the map in docs/architecture.md: " + ", ".join(sorted(missing))
    assert not extra, "on the map but not in the code: " + ", ".join(sorted(extra))
