"""scripts/apt_snapshot_archive.py, the loopback stand-in for snapshot.debian.org, against a small mirror made here:
a timestamp's indexes are the mirror's when it was first asked for and never move with the mirror, the pool is the
mirror's, and `bump` adds a newer version of a package beside the old one (once), at a timestamp or a new one."""

from __future__ import annotations

import gzip
import hashlib
import lzma
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.core import aptindex, ospins
from builder.render import aptfetch
from tests.fakes.aptarchive import Deb, Served, write_snapshot
from tests.fakes.checkout import ROOT

SCRIPT = ROOT / "scripts" / "apt_snapshot_archive.py"
T1, T2, T3 = "20261101T000000Z", "20261102T000000Z", "20261103T000000Z"
DEBS = [Deb("rif-hello", "1.0", "rif-lib (>= 1.0)"), Deb("rif-lib", "1.0")]


class Archive:
    def __init__(self, root: Path, mirror: str) -> None:
        self.root, self.mirror = root, mirror
        self.proc = subprocess.Popen([sys.executable, str(SCRIPT), "serve", "--root", str(root), "--port", "0",
                                      "--mirror", mirror], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().split()[1].rstrip("/")  # "serving http://127.0.0.1:PORT/ ..."

    def index(self, stamp: str) -> aptindex.Index:
        """Read afresh: `bump` rewrites a timestamp in place (a test archive; aptindex keeps a snapshot it read)."""
        aptindex.forget()
        return aptindex.load([ospins.Source(f"{self.url}/{stamp}/", "bookworm", ("main",))], aptfetch.fetch)

    def bump(self, *args: str) -> str:
        run = subprocess.run([sys.executable, str(SCRIPT), "bump", "--root", str(self.root), "--mirror", self.mirror,
                              *args], capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"{self.url}/{path}", timeout=30) as response:
            data: bytes = response.read()
            return data


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, Archive]]:
    mirror_root = tmp_path / "mirror"
    write_snapshot(mirror_root, "m", "bookworm", DEBS, real=True)
    mirror = Served(mirror_root)
    archive = Archive(tmp_path / "archive", f"{mirror.url}/m")
    yield mirror_root, archive
    archive.proc.terminate()
    archive.proc.wait(timeout=10)
    mirror.close()


def release_is_true(archive: Archive, stamp: str) -> None:
    """Every index the Release names has the hash it gives (apt refuses the suite otherwise), the unpacked one too
    (apt looks an index up by that name)."""
    text = archive.get(f"{stamp}/dists/bookworm/Release").decode()
    listed = dict(reversed(line.split()[::2]) for line in text.split("SHA256:\n", 1)[1].splitlines())
    assert "main/binary-amd64/Packages" in listed, text
    for name, digest in listed.items():
        if name.endswith("Packages"):  # named, not served: apt unpacks the packed one
            folder = archive.root / stamp / "dists" / "bookworm" / "main" / "binary-amd64"
            gz, xz = folder / "Packages.gz", folder / "Packages.xz"
            data = gzip.decompress(gz.read_bytes()) if gz.exists() else lzma.decompress(xz.read_bytes())
        else:
            data = archive.get(f"{stamp}/dists/bookworm/{name}")
        assert hashlib.sha256(data).hexdigest() == digest, name


def test_a_timestamp_keeps_the_mirror_as_it_first_saw_it(served: tuple[Path, Archive]) -> None:
    mirror_root, archive = served
    assert archive.index(T1).packages["rif-lib"].version == "1.0"
    release_is_true(archive, T1)
    write_snapshot(mirror_root, "m", "bookworm", [*DEBS, Deb("rif-lib", "1.1")], real=True)  # the mirror moves
    assert archive.index(T1).packages["rif-lib"].version == "1.0"
    assert archive.index(T2).packages["rif-lib"].version == "1.1"
    # the pool is the mirror's (a redirect)
    pooled = mirror_root / "m" / "pool" / "rif-lib_1.0_all.deb"
    assert archive.get(f"{T1}/pool/rif-lib_1.0_all.deb") == pooled.read_bytes()
    assert archive.get(f"{T1}/pool/rif-lib_1%2e0_all.deb") == pooled.read_bytes()  # apt quotes; the mirror unquotes


def test_bump_adds_a_newer_version_beside_the_old_one_once(served: tuple[Path, Archive], tmp_path: Path) -> None:
    _, archive = served
    assert archive.index(T1).packages["rif-lib"].version == "1.0"
    assert archive.bump("--time", T1, "rif-lib") == "rif-lib=1.0+rif1"
    newer = archive.index(T1).packages["rif-lib"]
    assert newer.version == "1.0+rif1"
    release_is_true(archive, T1)
    deb = archive.get(f"{T1}/pool/rif/rif-lib_1.0%2brif1_all.deb")  # as apt asks for it
    assert hashlib.sha256(deb).hexdigest() == newer.sha256
    (tmp_path / "new.deb").write_bytes(deb)
    shown = subprocess.run(["dpkg-deb", "-f", str(tmp_path / "new.deb"), "Package", "Version"], capture_output=True,
                           text=True, check=True).stdout
    assert shown.split() == ["Package:", "rif-lib", "Version:", "1.0+rif1"]
    text = archive.get(f"{T1}/dists/bookworm/main/binary-amd64/Packages.gz")
    assert gzip.decompress(text).count(b"Package: rif-lib\n") == 2  # the old version is still there
    assert archive.bump("--time", T1, "rif-lib") == "rif-lib=1.0+rif1"
    assert archive.get(f"{T1}/dists/bookworm/main/binary-amd64/Packages.gz") == text  # once
    # a later timestamp as a copy of T1's archive (the bump included), not the mirror's
    assert archive.bump("--time", T3, "--from", T1, "rif-lib") == "rif-lib=1.0+rif1"
    later = archive.index(T3)
    assert later.packages["rif-lib"] == newer and later.packages["rif-hello"].version == "1.0"
