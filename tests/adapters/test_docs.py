"""The docs stand alone: they cite only files in the repository, and their links resolve."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Citations of files that live outside the repository (escaped in the pattern, so this file does
# not match itself).
OUTSIDE = re.compile(r"\.\./shared|CONTRACT\.md|DESIGN\.md|\breference/[\w.-]+\.md|\breference §")


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.M | re.S)
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.M)


@cache
def tracked_files() -> list[str]:
    """The repository's tracked files (every file but the ignored ones, outside a git checkout)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        ignored = {".git", ".venv", "build", "dist", "__pycache__"}
        return sorted(
            path.relative_to(ROOT).as_posix()
            for path in ROOT.rglob("*")
            if path.is_file() and not ignored.intersection(path.relative_to(ROOT).parts)
        )
    return sorted(name for name in listed.split("\0") if name and (ROOT / name).is_file())


def markdown_files() -> list[str]:
    return [name for name in tracked_files() if name == "README.md" or re.fullmatch(r"docs/.+\.md", name)]


def cited_files() -> list[str]:
    return markdown_files() + [name for name in tracked_files() if name.endswith(".py")]


def slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings: lowercase, punctuation dropped, spaces as hyphens."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        base = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        slug, number = base, 0
        while slug in found:
            number += 1
            slug = f"{base}-{number}"
        found.add(slug)
    return found


def links(markdown: str) -> list[str]:
    text = FENCE.sub("", markdown)
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text) + REFERENCE_LINK.findall(text)


def test_the_patterns_catch_what_they_must():
    outside = ["../" + "shared/x", "CONTRACT" + ".md", "DESIGN" + ".md §2", "reference/" + "adk.md"]
    assert all(OUTSIDE.search(text) for text in outside)
    assert not OUTSIDE.search('docs/api.md "Rewind"; a reference implementation; reference counting')
    assert links('[a](docs/api.md#x) ![b](img.png "t") `[c](no.md)`\n[d]: other.md') == [
        "docs/api.md#x",
        "img.png",
        "other.md",
    ]
    assert slugs("# Turns and `format_event`\n## Planned (not built yet)\n## Planned (not built yet)") == {
        "turns-and-format_event",
        "planned-not-built-yet",
        "planned-not-built-yet-1",
    }


@pytest.mark.parametrize("name", cited_files())
def test_cites_only_files_in_the_repository(name: str):
    text = (ROOT / name).read_text(encoding="utf-8")
    found = [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, f"{name} cites files outside the repository:\n" + "\n".join(found)


def link_problem(source: Path, target: str) -> str | None:
    """Why a relative link from `source` does not resolve, or `None` when it does."""
    path, _, anchor = target.partition("#")
    resolved = (source.parent / path).resolve() if path else source
    if ROOT not in resolved.parents:
        return "outside the repository"
    if not resolved.exists():
        return "no such file"
    if anchor and resolved.suffix == ".md" and anchor not in slugs(resolved.read_text(encoding="utf-8")):
        return "no heading with that anchor"
    return None


@pytest.mark.parametrize("name", markdown_files())
def test_relative_links_resolve(name: str):
    source = ROOT / name
    broken = [
        f"{target}: {problem}"
        for target in links(source.read_text(encoding="utf-8"))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target, re.I)  # https:, mailto:, ...
        and (problem := link_problem(source, target))
    ]
    assert not broken, f"{name} has broken links:\n" + "\n".join(broken)


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_stays_short():
    assert len(readme().splitlines()) < 400, "move detail to docs/ (docs/production.md, docs/benchmarks.md)"


def fence_problems(markdown: str) -> list[str]:
    """Lines where a fence holds anything but its language (text after a closing fence swallows
    what follows it), and a fence left open at the end."""
    problems, open_fence = [], False
    for number, line in enumerate(markdown.splitlines(), 1):
        if "```" not in line:
            continue
        if not re.fullmatch(r"```[\w-]*", line) or (open_fence and line != "```"):
            problems.append(f"line {number}: {line}")
        if line == "```" if open_fence else line.startswith("```"):  # a closing fence holds nothing else
            open_fence = not open_fence
    return problems + (["a fence is left open at the end"] if open_fence else [])


def test_the_fence_check_catches_what_it_must():
    assert fence_problems("```bash\nmake\n``` then text\nmore\n") == [
        "line 3: ``` then text",
        "a fence is left open at the end",
    ]
    assert fence_problems("```python\nx = 1\n```\n\n```toml\n[a]\n```\n") == []


@pytest.mark.parametrize("name", markdown_files())
def test_fences_open_and_close_cleanly(name: str):
    assert not fence_problems((ROOT / name).read_text(encoding="utf-8"))


BENCHMARK_ROW = re.compile(
    r"^\| (?P<figure>[^|]+) \| (?P<ratio>[\d.]+) \| [^|]*\]\(docs/benchmarks\.md#(?P<anchor>[\w-]+)\)"
)


def section(markdown: str, anchor: str) -> str:
    """The text under the heading whose anchor is `anchor`, up to the next heading of any level."""
    parts = re.split(r"^(#{1,6} .*)$", FENCE.sub("", markdown), flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        if slugs(heading) == {anchor}:
            return body
    raise AssertionError(f"docs/benchmarks.md has no section #{anchor}")


def test_the_readme_benchmark_ratios_are_those_of_docs_benchmarks():
    """The README's headline table quotes docs/benchmarks.md: each ratio is in the section it links
    to, in a table row of the same run (a new run updates both, or this fails)."""
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    rows = [found.groupdict() for found in map(BENCHMARK_ROW.match, readme().splitlines()) if found]
    assert len(rows) >= 5
    for row in rows:
        table_rows = [
            line for line in section(benchmarks, row["anchor"]).splitlines() if line.startswith("|")
        ]
        quoted = [
            line
            for line in table_rows
            if re.search(rf"\| {re.escape(row['ratio'])} \||\({re.escape(row['ratio'])}[ x]", line)
        ]
        assert quoted, (
            f"{row['figure'].strip()}: ratio {row['ratio']} is not in docs/benchmarks.md#{row['anchor']}"
        )


def configuration_variables(markdown: str) -> set[str]:
    """The variables a configuration table names (docs/production.md's) (`_X` is short for `SESSIONLEDGER_X`;
    the `openai` package's own `OPENAI_*` names aside)."""
    table = section(markdown, "configuration")
    found: set[str] = set()
    for row in re.findall(r"^\| ([^|]+) \|", table, re.MULTILINE):
        found.update(f"SESSIONLEDGER_{name}" for name in re.findall(r"`(?:SESSIONLEDGER)?_([A-Z_]+)`", row))
    return found


def test_the_configuration_table_names_every_setting_and_no_other():
    from sessionledger.infrastructure.settings import Settings

    settings = {f"SESSIONLEDGER_{name.upper()}" for name in Settings.model_fields}
    named = configuration_variables((ROOT / "docs" / "production.md").read_text(encoding="utf-8"))
    assert not settings - named, f"settings production.md does not list: {sorted(settings - named)}"
    assert not named - settings, f"production.md lists settings that do not exist: {sorted(named - settings)}"


def test_the_configuration_table_reading_expands_short_names():
    table = "## Configuration\n\n| `SESSIONLEDGER_A_B` / `_C` and `OPENAI_API_KEY` | 1 |\n"
    assert configuration_variables(table) == {"SESSIONLEDGER_A_B", "SESSIONLEDGER_C"}
