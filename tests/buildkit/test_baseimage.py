"""builder.buildkit.baseimage: the host's apt mirror, read from deb822 and one-line sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.buildkit import baseimage
from builder.core.errors import InputError

DEB822 = """Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_host_mirror_reads_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    assert baseimage.host_mirror("debian", tmp_path) == "http://mirror.example/debian"
    assert baseimage.host_mirror("ubuntu", tmp_path) is None


def test_host_mirror_reads_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "# comment\ndeb-src http://src.example/ubuntu noble main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://archive.example/ubuntu/ noble main universe\n")
    assert baseimage.host_mirror("ubuntu", tmp_path) == "http://archive.example/ubuntu/"


def test_a_misspelt_os_gets_the_name_it_meant_and_the_list() -> None:
    with pytest.raises(InputError) as caught:
        baseimage.build_base("debain-13", None)
    [problem] = caught.value.problems
    assert problem.message.startswith("unknown os 'debain-13'; did you mean 'debian-13'? known: debian-12, debian-13")
