"""An apt index is hostile input: bounded in bytes, unpacked bytes, stanzas, pins and time; every field in Debian's
grammar; corrupt data one ArchiveError naming the index, never a crash, never raw terminal escapes.

The shapes are a real Packages index's (Debian bookworm's main/binary-amd64 index: `Package:`, `Version:`,
`Architecture:`, `Depends:`, `SHA256:` stanzas separated by blank lines, served as Packages.xz/.gz/.bz2 or plain);
the limits are the documented ones (builder/render/aptfetch.py, core/aptindex.py, core/ospins.py), written as literals.
"""

from __future__ import annotations

import gzip
import lzma
import time
from collections.abc import Iterator

import pytest

from builder.core import aptindex
from builder.core.ospins import Source
from builder.render import aptfetch
from tests.fakes.aptarchive import INDEX_PATH, RawIndex

SHA = "a" * 64


def stanza(name: str, version: str = "1.0-1", depends: str = "", sha: str = SHA, arch: str = "all") -> str:
    extra = f"Depends: {depends}\n" if depends else ""
    return f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\n{extra}SHA256: {sha}\n\n"


@pytest.fixture
def serve() -> Iterator[list[RawIndex]]:
    servers: list[RawIndex] = []
    yield servers
    for s in servers:
        s.close()
    aptindex.forget()


def load(servers: list[RawIndex], files: dict[str, bytes], **kw: object) -> aptindex.Index:
    server = RawIndex({INDEX_PATH + name: body for name, body in files.items()}, **kw)  # type: ignore[arg-type]
    servers.append(server)
    return aptindex.load([Source(server.url, "bookworm", ("main",))], aptfetch.fetch)


def test_an_xz_bomb_is_refused_past_256_mib_unpacked_without_one_call_unpack(serve: list[RawIndex]) -> None:
    one_mib = lzma.compress(b"\0" * (1 << 20))
    bomb = one_mib * 257  # concatenated xz streams: 257 MiB unpacked, one MiB past the documented 256 MiB
    assert len(bomb) < 100_000
    with pytest.raises(aptindex.ArchiveError, match=r"Packages\.xz: more than 268435456 bytes unpacked"):
        load(serve, {"Packages.xz": bomb})


def test_a_gzip_bomb_in_one_stream_is_refused_too(serve: list[RawIndex]) -> None:
    bomb = gzip.compress(b"\0" * (257 << 20), compresslevel=1)
    with pytest.raises(aptindex.ArchiveError, match=r"Packages\.gz: more than 268435456 bytes unpacked"):
        load(serve, {"Packages.gz": bomb})


def test_a_download_over_64_mib_is_refused_from_its_length(serve: list[RawIndex]) -> None:
    with pytest.raises(aptindex.ArchiveError, match=r"Packages: 67108865 bytes is more than the 67108864"):
        load(serve, {"Packages": b"x"}, length=(64 << 20) + 1)


def test_a_server_dripping_bytes_is_cut_at_the_downloads_deadline(serve: list[RawIndex],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """One deadline for the whole download, not per read: each byte comes well within any per-read timeout."""
    monkeypatch.setattr(aptfetch, "DEADLINE_S", 1.0)
    start = time.monotonic()
    with pytest.raises(aptindex.Unreachable, match="no complete answer within 1 s"):
        load(serve, {"Packages": stanza("rif-a").encode()}, drip=0.2)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(("name", "body", "message"), [
    ("Packages.xz", b"\xfd7zXZ\x00" + b"\x13" * 64, r"Packages\.xz: not a valid xz stream"),
    ("Packages.gz", gzip.compress(stanza("rif-a").encode(), mtime=0)[:-8] + b"\0\0\0\0\0\0\0\0",
     r"Packages\.gz: not a valid gz stream"),  # CRC32 and size of the data zeroed
    ("Packages.gz", gzip.compress(stanza("rif-a").encode(), mtime=0)[:-12], r"Packages\.gz: the gz stream ends early"),
    ("Packages.bz2", b"BZh9" + b"\x00" * 40, r"Packages\.bz2: not a valid bz2 stream"),
], ids=["xz", "gz-crc", "gz-cut", "bz2"])
def test_corrupt_compressed_data_is_one_archive_error_naming_the_index(serve: list[RawIndex], name: str,
                                                                       body: bytes, message: str) -> None:
    with pytest.raises(aptindex.ArchiveError, match=message) as caught:
        load(serve, {name: body})
    assert INDEX_PATH in str(caught.value)


@pytest.mark.parametrize(("text", "what"), [
    (stanza("rif-a", "1.0$(reboot)"), "Version"),
    (stanza("rif-a", "not-a-version"), "Version"),
    (stanza("rif-a", "1.0\n source: http://203.0.113.9/ x main"), "Version"),  # a continuation line
    (stanza("rif-$(id)"), "Package"),
    (stanza("Rif-Upper"), "Package"),
    (stanza("a"), "Package"),  # one character: Policy wants two
    (stanza("rif-a", "1:" + "9" * 127), "Version"),  # 129 characters: the documented cap is 128
    (stanza("r" * 129), "Package"),  # the documented cap is 128
    (stanza("rif-a", sha="a" * 63), "SHA256"),
    (stanza("rif-a", sha="a" * 65), "SHA256"),
], ids=["shell", "word", "continuation", "name-shell", "upper", "one-char", "version-129", "name-129", "sha-63",
        "sha-65"])
def test_a_field_outside_debians_grammar_is_refused_naming_the_index(serve: list[RawIndex], text: str,
                                                                     what: str) -> None:
    with pytest.raises(aptindex.ArchiveError, match=what) as caught:
        load(serve, {"Packages": text.encode()})
    assert INDEX_PATH in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("version", ["1.0", "1:2.36-9+deb12u4", "0.0~git20230809.0a4e6ee+dfsg-1", "2.1-1-2",
                                     "1:1.2:3-4", "1" * 128])
def test_versions_in_debians_grammar_are_read(serve: list[RawIndex], version: str) -> None:
    index = load(serve, {"Packages": (stanza("rif-a", version) + stanza("r" * 128)).encode()})
    assert index.packages["rif-a"].version == version and "r" * 128 in index.packages


def test_a_dependency_that_cannot_be_parsed_is_an_error_printed_escaped(serve: list[RawIndex],
                                                                        capfd: pytest.CaptureFixture[str]) -> None:
    index = load(serve, {"Packages": stanza("rif-a", depends="rif-b (>> \x1b]0;pwned\x07\x1b[2J").encode()})
    with pytest.raises(aptindex.ArchiveError, match="Depends") as caught:
        index.closure(["rif-a"], set())
    assert "\x1b" not in str(caught.value) and "\\x1b" in str(caught.value)
    out, err = capfd.readouterr()
    assert "\x1b" not in out + err


def test_a_dependency_version_outside_the_grammar_is_refused(serve: list[RawIndex]) -> None:
    index = load(serve, {"Packages": (stanza("rif-a", depends="rif-b (>= abc)") + stanza("rif-b")).encode()})
    with pytest.raises(aptindex.ArchiveError, match="no version"):
        index.closure(["rif-a"], set())


def test_more_than_200000_stanzas_are_refused_before_they_are_parsed(serve: list[RawIndex]) -> None:
    text = "".join(f"Package: r{n}\nVersion: 1\nArchitecture: arm64\n\n" for n in range(200_001)).encode()
    start = time.monotonic()
    with pytest.raises(aptindex.ArchiveError, match="more than 200000 stanzas"):
        load(serve, {"Packages.gz": gzip.compress(text, compresslevel=1)})
    assert time.monotonic() - start < 30


def test_a_closure_of_more_than_5000_packages_is_refused_before_a_lock_is_written(serve: list[RawIndex]) -> None:
    chain = "".join(stanza(f"rif-{n}", depends=f"rif-{n + 1}") for n in range(5_001)) + stanza("rif-5001")
    index = load(serve, {"Packages": chain.encode()})
    with pytest.raises(aptindex.ArchiveError, match="more than 5000 packages"):
        index.closure(["rif-0"], set())
    assert len(index.closure(["rif-2"], set())) == 5_000  # exactly the documented limit still locks
