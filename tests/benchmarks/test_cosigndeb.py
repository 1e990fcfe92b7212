"""Debian's cosign for bench_sign: the signed Release's hashes, the package's stanza held to a cosign .deb under
pool/, the .deb checked and unpacked into the cache (a real one, made with `dpkg-deb --build`) and reused, and what
the mirror or the cache folder hold that is not what it should be. Shapes from Debian sid's own files of
2026-10-30: dists/sid/InRelease and main/binary-amd64/Packages.xz (cosign 3.1.1-2) from deb.debian.org."""

from __future__ import annotations

import hashlib
import lzma
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks.support import cosigndeb
from benchmarks.support.cosigndeb import CosignError

INDEX_SHA = "28476c952cd0732e0ba28e3c14fbb9a8beb412eb2b3cb96bf9d067d54caacf1b"
RELEASE = f"""Origin: Debian
Suite: unstable
Codename: sid
Date: Fri, 30 Oct 2026 08:08:01 UTC
MD5Sum:
 d70654e4ff73403c5076a564041f1484 10824484 main/binary-amd64/Packages.xz
SHA256:
 {INDEX_SHA} 10824484 main/binary-amd64/Packages.xz
 not-a-hash 12 main/binary-arm64/Packages.xz
 {"a" * 64} twelve main/binary-i386/Packages.xz
"""
COSIGN = """Package: cosign
Version: 3.1.1-2
Installed-Size: 84878
Architecture: amd64
Depends: libc6 (>= 2.34)
Description: Code signing/transparency for containers and binaries (program)
Built-Using: amazon-ecr-credential-helper (= 0.12.0-1), docker-registry (= 2.8.3+ds1-3),
 golang-1.27 (= 1.27.3-1)
Section: golang
Filename: pool/main/c/cosign/cosign_3.1.1-2_amd64.deb
Size: 17676136
SHA256: d8622ebffce1d69197288fc030ff06a4c247af5507107f85c5a878870b686b23
"""
NEIGHBOURS = ("Package: cosign-doc\nVersion: 9.9\nFilename: pool/main/c/cosign/x.deb\n\n"
              "Package: coreutils\nVersion: 9.7-3\n")


def test_the_sha256_section_of_a_release_and_nothing_malformed() -> None:
    assert cosigndeb.release_sha256(RELEASE) == {cosigndeb.INDEX: (INDEX_SHA, 10824484)}


def test_the_cosign_stanza_among_its_neighbours() -> None:
    found = cosigndeb.entry(f"{NEIGHBOURS}\n\n{COSIGN}\n{NEIGHBOURS}")
    assert found == cosigndeb.Entry("3.1.1-2", "pool/main/c/cosign/cosign_3.1.1-2_amd64.deb",
                                    "d8622ebffce1d69197288fc030ff06a4c247af5507107f85c5a878870b686b23", 17676136)


@pytest.mark.parametrize(("field", "value", "complaint"), [
    ("Filename", "pool/main/c/cosign/../../../../etc/cosign_1_amd64.deb", "Filename"),
    ("Filename", "http://elsewhere.example/cosign_3.1.1-2_amd64.deb", "Filename"),
    ("Filename", "pool/main/c/cosign/cosign_3.1.1-2_arm64.deb", "Filename"),
    ("Filename", "pool/main/c/cosign/sigstore_3.1.1-2_amd64.deb", "Filename"),
    ("Version", "3.1.1-2; rm -rf /", "Version"),
    ("SHA256", "d8622ebf", "SHA256"),
    ("Size", str(cosigndeb.DEB_LIMIT + 1), "Size"),
])
def test_a_stanza_that_is_not_a_cosign_deb_under_pool_is_refused(field: str, value: str, complaint: str) -> None:
    text = "\n".join(f"{field}: {value}" if line.startswith(f"{field}:") else line for line in COSIGN.splitlines())
    with pytest.raises(CosignError, match=complaint):
        cosigndeb.entry(text)


def test_an_index_without_cosign_is_an_error() -> None:
    with pytest.raises(CosignError, match="no cosign"):
        cosigndeb.entry(NEIGHBOURS)


def test_a_folder_name_spells_an_epoch_as_dpkg_does() -> None:
    assert cosigndeb.folder_name("3.1.1-2") == "cosign-3.1.1-2"
    assert cosigndeb.folder_name("1:2.5.0-2+b5") == "cosign-1%3a2.5.0-2+b5"
    with pytest.raises(CosignError):
        cosigndeb.folder_name("../3")


def test_an_unsigned_release_is_refused_by_gpgv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cosigndeb, "fetch", lambda url, limit: RELEASE.encode())
    with pytest.raises(CosignError, match="gpgv found no good signature"):
        cosigndeb.signed_release("http://mirror.invalid/debian", "sid")


def test_an_index_that_unpacks_past_its_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    packed = lzma.compress(b"\n" * 4096, format=lzma.FORMAT_XZ)
    sha = hashlib.sha256(packed).hexdigest()
    monkeypatch.setattr(cosigndeb, "signed_release", lambda mirror, suite: f"SHA256:\n {sha} 1 {cosigndeb.INDEX}\n")
    monkeypatch.setattr(cosigndeb, "fetch", lambda url, limit: packed)
    monkeypatch.setattr(cosigndeb, "INDEX_TEXT_LIMIT", 1024)
    with pytest.raises(CosignError, match="unpacked"):
        cosigndeb.look_up("http://mirror.invalid/debian", "sid")


def deb(tmp_path: Path, version: str = "3.1.1-2") -> bytes:
    """A cosign .deb as Debian lays it out (usr/bin/cosign), its cosign a script that answers `version`."""
    tree = tmp_path / "tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(f"Package: cosign\nVersion: {version}\nArchitecture: amd64\n"
                                             "Maintainer: test <t@example.org>\nDescription: stand-in\n")
    (tree / "usr" / "bin").mkdir(parents=True)
    binary = tree / "usr" / "bin" / "cosign"
    binary.write_text("#!/bin/sh\nprintf 'GitVersion:    devel\\nGoVersion:     go1.27.3\\n'\n")
    binary.chmod(0o755)
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(tmp_path / "c.deb")], check=True,
                   capture_output=True)
    return (tmp_path / "c.deb").read_bytes()


def mirror(monkeypatch: pytest.MonkeyPatch, data: bytes, sha256: str | None = None) -> list[str]:
    """The mirror's answers: cosign's stanza naming data (or another sha256), and data for the .deb."""
    fetched: list[str] = []
    found = cosigndeb.Entry("3.1.1-2", "pool/main/c/cosign/cosign_3.1.1-2_amd64.deb",
                            sha256 or hashlib.sha256(data).hexdigest(), len(data))
    monkeypatch.setattr(cosigndeb, "look_up", lambda mirror, suite: found)

    def fetch(url: str, limit: int) -> bytes:
        fetched.append(url)
        return data
    monkeypatch.setattr(cosigndeb, "fetch", fetch)
    return fetched


def test_the_deb_is_unpacked_into_the_cache_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fetched = mirror(monkeypatch, deb(tmp_path))
    cache = tmp_path / "cache"
    tool = cosigndeb.ensure("sid", "http://mirror.invalid/debian", cache=cache)
    assert tool.binary == cache / "cosign-3.1.1-2" / "usr" / "bin" / "cosign"
    assert tool.origin.url == "http://mirror.invalid/debian/pool/main/c/cosign/cosign_3.1.1-2_amd64.deb"
    assert sorted(p.name for p in cache.iterdir()) == ["cosign-3.1.1-2"]
    assert not (cache / "cosign-3.1.1-2" / "package.deb").exists()
    assert cosigndeb.ensure("sid", "http://mirror.invalid/debian", cache=cache) == tool
    assert cosigndeb.ensure("sid", "http://mirror.invalid/debian", refresh=True, cache=cache) == tool
    assert len(fetched) == 1  # the second run reads the cache; a refresh finds the same sha256 there


def test_a_deb_whose_sha256_differs_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror(monkeypatch, deb(tmp_path), sha256="f" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(CosignError, match="sha256"):
        cosigndeb.install("http://mirror.invalid/debian", "sid", cache)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_folder_we_did_not_write_is_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror(monkeypatch, deb(tmp_path))
    theirs = tmp_path / "cache" / "cosign-3.1.1-2"
    (theirs / "usr" / "bin").mkdir(parents=True)
    (theirs / "usr" / "bin" / "cosign").write_text("someone else's\n")
    with pytest.raises(CosignError, match="not ours"):
        cosigndeb.install("http://mirror.invalid/debian", "sid", tmp_path / "cache")
    assert (theirs / "usr" / "bin" / "cosign").read_text() == "someone else's\n"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["cosign-3.1.1-2"]


def test_the_cache_holds_only_what_its_records_name(tmp_path: Path) -> None:
    def unpacked(folder: str, version: str, fetched: str, record: str | None = None) -> Path:
        binary = tmp_path / folder / "usr" / "bin" / "cosign"
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\n")
        os.chmod(binary, 0o755)
        origin = cosigndeb.Origin(package="cosign", version=version, suite="sid", url="http://m/x.deb",
                                  sha256="0" * 64, fetched=fetched)
        (tmp_path / folder / cosigndeb.RECORD).write_text(record or origin.model_dump_json())
        return binary
    older = unpacked("cosign-2.5.0-2+b5", "2.5.0-2+b5", "2026-11-01T00:00:00+00:00")
    found = cosigndeb.cached(tmp_path)
    assert found is not None and found.binary == older
    newer = unpacked("cosign-3.1.1-2", "3.1.1-2", "2026-11-29T00:00:00+00:00")
    unpacked("cosign-9.9-1", "3.1.1-2", "2026-12-01T00:00:00+00:00")  # its record names another folder
    unpacked("cosign-9.8-1", "9.8-1", "2026-12-01T00:00:00+00:00", record='{"package": "cosign"}')
    found = cosigndeb.cached(tmp_path)
    assert found is not None and found.binary == newer
