"""The README and docs/ stay navigable and true: every relative link resolves, the README stays a five-minute read,
and the samples they show (`builder which` output, the image `latest` goes to) are what the code does today.

A link is `[text](path)` or `[text](path#anchor)` outside code; http(s) and mailto links are not followed. The path
is relative to the file that holds the link and must name a file or folder inside the repository; an anchor must
name a heading of the Markdown file it points into, spelled as GitHub spells heading anchors. A sample is a line
`$ python -m builder which ...` in a fenced block and the lines after it up to the next `$ ` line or the fence.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from pathlib import Path

import pytest

from builder.matrix.expand import expand_matrix
from builder.matrix.selection import latest_cell
from tests.fakes.checkout import ROOT, builder_cli

README_MAX_LINES = 250
EXTERNAL = ("http://", "https://", "mailto:")

FENCE = re.compile(r"^ *(```|~~~).*?^ *\1[^\n]*$", re.S | re.M)  # fenced code blocks, indented ones included
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)  # `code`, ``co`de``
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)
SAMPLE_COMMAND = "$ python -m builder which "


def markdown_files(root: Path) -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def prose(text: str) -> str:
    """Text without code: fenced blocks and code spans hold examples, not links (link texts keep their place)."""
    return CODE_SPAN.sub("code", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path) -> list[str]:
    """Each relative link of page that does not resolve, with why."""
    problems = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if target.lower().startswith(EXTERNAL):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page.resolve()
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{target}: points outside the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file or folder {resolved.relative_to(root.resolve())}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: {resolved.relative_to(root.resolve())} has no heading #{anchor}")
    return problems


@pytest.mark.parametrize("page", markdown_files(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    problems = broken_links(page, ROOT)
    assert not problems, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(problems)


def test_docs_exist_and_readme_links_them() -> None:
    pages = markdown_files(ROOT)[1:]
    assert pages, "docs/ holds no Markdown page"
    linked = set(LINK.findall(prose((ROOT / "README.md").read_text(encoding="utf-8"))))
    unlinked = [str(p.relative_to(ROOT)) for p in pages if str(p.relative_to(ROOT)) not in linked]
    assert not unlinked, f"README.md links no page of: {unlinked}"


def test_readme_is_a_five_minute_read() -> None:
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md is {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    """The checker itself: a missing file, a missing anchor and a link out of the tree fail; code is skipped."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Two words: `here`\n\n## Two words: `here`\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md) [ok](docs/a.md#two-words-here) [ok](docs/a.md#two-words-here-1) [ok](#top)\n"
        "[gone](docs/b.md) [no anchor](docs/a.md#three) [out](../outside.md) [web](https://example.com/x)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n\n# Top\n")
    problems = broken_links(tmp_path / "README.md", tmp_path)
    assert [p.split(":")[0] for p in problems] == ["docs/b.md", "docs/a.md#three", "../outside.md"]


def which_samples(page: Path) -> list[tuple[str, str]]:
    """(arguments, printed output) of every `builder which` sample in the fenced blocks of page."""
    samples = []
    text = page.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        lines = match.group(0).splitlines()[1:-1]
        starts = [i for i, line in enumerate(lines) if line.startswith("$ ")] + [len(lines)]
        for start, end in itertools.pairwise(starts):
            if lines[start].startswith(SAMPLE_COMMAND):
                output = "\n".join(lines[start + 1:end]).strip("\n")
                samples.append((lines[start].removeprefix(SAMPLE_COMMAND), output))
    return samples


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "which.md"], ids=lambda p: p.name)
def test_which_samples_are_what_the_command_prints(page: Path) -> None:
    samples = which_samples(page)
    assert samples, f"{page.relative_to(ROOT)} shows no `{SAMPLE_COMMAND.strip()}` sample"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for arguments, shown in samples:
        run = builder_cli("which", *shlex.split(arguments), env=env, timeout=120)
        assert run.stdout.strip("\n") == shown, (
            f"{page.relative_to(ROOT)}: `builder which {arguments}` prints something else now (exit {run.returncode}"
            f"{', ' + run.stderr.strip() if run.stderr.strip() else ''}); run it and paste its output:\n{run.stdout}")


def test_latest_examples_are_what_latest_cell_picks() -> None:
    """docs/publishing.md names the image `latest` goes to for matrix.yaml and examples/local.yaml: still so."""
    text = (ROOT / "docs" / "publishing.md").read_text(encoding="utf-8")
    named = {"matrix.yaml": re.search(r"`([^`]+)` for `matrix\.yaml`", text),
             "examples/local.yaml": re.search(r"the `latest` of\s+`examples/local\.yaml` is `([^`]+)`", text)}
    for matrix, match in named.items():
        assert match, f"docs/publishing.md no longer names the `latest` of {matrix}"
        expansion = expand_matrix(ROOT / matrix)
        cell = latest_cell(expansion.cells, expansion.default_os)
        assert cell is not None and cell.tag == match.group(1), (
            f"docs/publishing.md says `latest` of {matrix} is {match.group(1)}; latest_cell picks "
            f"{cell.tag if cell else None}")


def test_architecture_lists_every_module_of_every_room() -> None:
    """docs/architecture.md has one row per folder of builder/, naming exactly the modules (and folders) it holds."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `builder/(\w+)/` \|.*\| ([^|\n]*) \|$", text, re.M))
    rooms = {p.name for p in (ROOT / "builder").iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert set(rows) == rooms, f"docs/architecture.md: rows for {sorted(rows)}, folders {sorted(rooms)}"
    for room, listed in rows.items():
        folder = ROOT / "builder" / room
        held = {p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()
                if p.name not in {"__init__.py", "__pycache__"} and (p.is_dir() or p.suffix in {".py", ".yaml"})}
        named = set(re.findall(r"`([^`]+)`", listed))
        assert named == held, (f"docs/architecture.md, row builder/{room}/: lists {sorted(named - held)} that the "
                               f"folder does not hold, misses {sorted(held - named)}")
