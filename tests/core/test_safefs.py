"""builder.core.safefs: files read only when regular and small, written whole, never through a link or out of root.

What is planted at the paths each command writes (links, FIFOs, hard links) is tests/hostile/test_planted.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder.core import safefs


def test_read_regular_reads_up_to_the_limit_or_cuts_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert safefs.read_regular(path, 10) == b"0123456789"
    assert safefs.read_regular(path, 4, cut=True) == b"0123"
    with pytest.raises(safefs.UnsafePath, match="10 bytes, over the limit of 4 bytes"):
        safefs.read_regular(path, 4)


def test_read_regular_follows_a_link_only_when_asked_and_refuses_a_fifo_or_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    with pytest.raises(safefs.UnsafePath, match="a symbolic link: not followed"):
        safefs.read_regular(tmp_path / "link", 10)
    assert safefs.read_regular(tmp_path / "link", 10, follow=True) == b"x"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(safefs.UnsafePath, match="not a regular file"):
        safefs.read_regular(tmp_path / "fifo", 10)
    with pytest.raises(safefs.UnsafePath, match="not a regular file"):
        safefs.read_regular(tmp_path, 10)


@pytest.mark.parametrize(("name", "parts"), [
    ("a/b.html", ("a", "b.html")), ("x", ("x",)), ("/etc/passwd", None), ("a/../b", None), ("./a", None),
    ("a//b", None), ("", None), ("a\\b", None), ("a\x00", None), (3, None),
])
def test_relative_parts_stay_inside_their_folder(name: object, parts: tuple[str, ...] | None) -> None:
    assert safefs.relative_parts(name) == parts


def test_write_inside_makes_folders_and_refuses_a_name_or_link_that_leads_out(tmp_path: Path) -> None:
    root = tmp_path / "site"
    path = safefs.write_inside(root, "images/a.html", b"a", 0o640)
    assert path.read_bytes() == b"a" and path.stat().st_mode & 0o777 == 0o640
    with pytest.raises(safefs.UnsafePath, match="not a relative path"):
        safefs.write_inside(root, "../out.html", b"x")
    (root / "escape").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(safefs.UnsafePath, match="a symbolic link where a folder should be"):
        safefs.write_inside(root, "escape/x.html", b"x")
    assert not (tmp_path / "x.html").exists()


def test_replace_file_writes_whole_with_its_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(b"old")
    old = os.umask(0o077)
    try:
        safefs.replace_file(path, b"new", 0o644)  # the factory's mode, whatever the umask says
    finally:
        os.umask(old)
    assert path.read_bytes() == b"new" and path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_copy_file_keeps_the_sources_times(tmp_path: Path) -> None:
    source = tmp_path / "w.whl"
    source.write_bytes(b"wheel")
    os.utime(source, ns=(1_000_000_000, 2_000_000_000))
    copied = safefs.copy_file(source, tmp_path / "copy.whl")
    assert copied.read_bytes() == b"wheel" and copied.stat().st_mtime_ns == 2_000_000_000


def test_remove_inside_removes_files_and_links_not_folders_nor_what_is_outside(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    (tmp_path / "folder").mkdir()
    assert safefs.remove_inside(tmp_path, "link") and (tmp_path / "f").exists()
    assert safefs.remove_inside(tmp_path, "f") and not (tmp_path / "f").exists()
    assert not safefs.remove_inside(tmp_path, "folder") and not safefs.remove_inside(tmp_path, "../x")
    assert not safefs.remove_inside(tmp_path, "missing")


def test_inside_resolves_links(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "out").symlink_to(tmp_path, target_is_directory=True)
    assert safefs.inside(tmp_path / "root", tmp_path / "root" / "a")
    assert not safefs.inside(tmp_path / "root", tmp_path / "root" / "out" / "a")
