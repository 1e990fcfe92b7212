"""builder.site.pages: Markdown escaped and fenced, and a site folder that holds only the catalog's own pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder import site
from builder.site import pages
from builder.validate.runner import Check


def test_markdown_fences_and_escapes() -> None:
    assert site.md_escape("a|b <i> [x](y) *z* snake_case _lead & &amp;") == \
        "a\\|b \\<i\\> \\[x\\](y) \\*z\\* snake_case \\_lead & \\&amp;"
    assert site.md_escape("two\nlines") == "two lines"
    fenced = site.md_fence("echo ```` done")
    assert fenced.startswith("`````\n") and fenced.endswith("\n`````")
    assert site.md_escape(fenced) == fenced



def test_write_site_replaces_its_own_pages_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "site"
    site.write_site(out, {"index.html": "1", "images/pytorch/a.html": "a"})
    (out / "CNAME").write_text("images.example.org\n")
    site.write_site(out, {"index.html": "2", "images/pytorch/b.html": "b"})
    assert (out / "index.html").read_text() == "2" and (out / "images/pytorch/b.html").is_file()
    assert not (out / "images/pytorch/a.html").exists() and (out / "CNAME").is_file()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(site.InputError, match="not empty"):
        site.write_site(foreign, {"index.html": "x"})


def test_md_url_quotes_what_would_end_a_link() -> None:
    assert pages.md_url("images/pytorch/a b(c).md") == "images/pytorch/a%20b%28c%29.md"
    assert pages.md_escape(pages.md_url("a b")) == "a%20b"  # already safe: printed as it is


def test_wrap_tag_escapes_each_part_and_may_break_after_underscores() -> None:
    assert str(pages.wrap_tag("a_<b>_c")) == "a_<wbr>&lt;b&gt;_<wbr>c"


def test_counts_of_checks() -> None:
    assert pages._counts([]) == "not recorded"
    checks = [Check("s", "a", "pass"), Check("s", "b", "pass"), Check("s", "c", "warn"), Check("s", "d", "odd")]
    assert pages._counts(checks) == "2 passed, 1 warnings"
    assert pages._counts([Check("s", "d", "odd")]) == "1 checks"


@pytest.mark.parametrize(("name", "ours"), [
    ("index.html", True), ("records.json", True), ("images/pytorch/cpu_debian12_py3.11_torch2.13.0_runtime.md", True),
    (".git/config", False), ("CNAME", False), ("images/../index.html", False),
])
def test_is_site_file_names_only_what_a_catalog_writes(name: str, ours: bool) -> None:
    assert pages.is_site_file(name) is ours


def test_a_lone_surrogate_is_written_as_its_escape() -> None:
    assert pages._utf8("x\udcff") == b"x\\udcff"
