"""docs/architecture.md: mypy checks the whole package strictly, and each `type: ignore` left in it
names its error code and says why (on its line, or in the comment line just above)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<code>\[[\w\-, ]+\])?(?P<rest>.*)$")


def unexplained(lines: list[str]) -> list[int]:
    """The line numbers of ignores without a code, or with neither a reason after them nor a
    comment line above."""
    found = []
    for number, line in enumerate(lines, 1):
        if not (match := IGNORE.search(line)):
            continue
        reason_after = re.match(r"\s*#\s*\S", match.group("rest"))
        reason_above = number > 1 and lines[number - 2].lstrip().startswith("#")
        if not match.group("code") or not (reason_after or reason_above):
            found.append(number)
    return found


def test_the_rule_finds_a_bare_ignore_and_accepts_a_reasoned_one():
    assert unexplained(["x = f()  # type: ignore", "y = g()  # type: ignore[misc]"]) == [1, 2]
    assert unexplained(["x = f()  # type: ignore[misc]  # f is untyped"]) == []
    assert unexplained(["# f is untyped", "x = f()  # type: ignore[misc]"]) == []


def test_every_type_ignore_in_the_package_says_why():
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    package = [
        name
        for name in files
        if name.split("/", 1)[0] in ("sessionledger", "domain", "infrastructure", "workers")
    ]
    assert package
    problems = {
        name: lines
        for name in package
        if (lines := unexplained((ROOT / name).read_text(encoding="utf-8").splitlines()))
    }
    assert problems == {}
