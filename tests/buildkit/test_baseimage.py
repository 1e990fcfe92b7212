"""builder.buildkit.baseimage: the host's apt mirror, read from deb822 and one-line sources; a snapshot base's label."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from builder.buildkit import baseimage
from builder.core import tags
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


def test_a_base_made_from_a_snapshot_carries_its_snapshot_label(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without debootstrap or an engine: a stand-in root, and the archive `docker load` would read kept."""
    loaded: list[bytes] = []
    run = subprocess.run

    def debootstrap(os_name: str, release: object, root: Path, mirror: str, extra: list[str],
                    env: dict[str, str] | None = None) -> None:
        for folder in ("usr/bin", "etc/apt"):
            (root / folder).mkdir(parents=True)
        (root / "usr" / "bin" / "tool").write_text("x")

    def docker_load(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if cmd[:2] != ["docker", "load"]:
            return run(cmd, **kwargs)
        loaded.append(Path(cmd[-1]).read_bytes())
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(baseimage, "_debootstrap", debootstrap)
    monkeypatch.setattr(subprocess, "run", docker_load)
    baseimage.build_base("debian-12", "http://127.0.0.1:9/archive", snapshot="20261101T000000Z")
    with tarfile.open(fileobj=io.BytesIO(loaded[0])) as archive:
        [name] = [m.name for m in archive.getmembers() if m.name.endswith(".json") and m.name != "manifest.json"]
        config = json.loads(archive.extractfile(name).read())  # type: ignore[union-attr]
    assert config["config"]["Labels"] == {tags.SNAPSHOT_LABEL: "20261101T000000Z"}
