"""builder.render.aptfetch on its own: which of a folder's Packages indexes it reads, what each failure is, and its
stream unpacker (_Unpacked) fed chunk by chunk, capped, cut short.

The archive is tests/fakes/aptarchive.RawIndex on loopback; its files are named and compressed as a Debian archive's
main/binary-amd64 folder is (Packages.xz, Packages.gz, Packages.bz2, Packages; deb.debian.org, bookworm). The limits
are the documented ones (aptfetch.py: 64 MiB downloaded, 256 MiB unpacked), written as literals. Whole-index bombs
and corrupt streams read through aptindex.load are in tests/hostile/test_apt_index.py.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from builder.render import aptfetch
from tests.fakes.aptarchive import INDEX_PATH, RawIndex

STANZA = b"Package: rif-a\nVersion: 1.0-1\nArchitecture: all\n\n"
PACK: dict[str, Callable[[bytes], bytes]] = {"xz": lzma.compress, "gz": lambda b: gzip.compress(b, mtime=0),
                                            "bz2": bz2.compress, "": lambda b: b}


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """Serve {file name: body} under INDEX_PATH; returns the folder's URL."""
    servers: list[RawIndex] = []

    def start(files: dict[str, bytes], statuses: dict[str, int] | None = None, **kw: object) -> str:
        server = RawIndex({INDEX_PATH + n: b for n, b in files.items()},
                          statuses={INDEX_PATH + n: c for n, c in (statuses or {}).items()}, **kw)  # type: ignore[arg-type]
        servers.append(server)
        return server.url.rstrip("/") + INDEX_PATH

    yield start
    for server in servers:
        server.close()


# -- fetch: which index, and what each failure is -------------------------------------------------------------------

@pytest.mark.parametrize("served", [("Packages.xz", "Packages.gz", "Packages.bz2", "Packages"),
                                    ("Packages.gz", "Packages.bz2", "Packages"), ("Packages.bz2", "Packages"),
                                    ("Packages",)], ids=["xz", "gz", "bz2", "plain"])
def test_the_first_index_served_in_apts_order_is_read_and_unpacked(serve: Callable[..., str],
                                                                    served: tuple[str, ...]) -> None:
    files = {n: PACK[n.partition(".")[2]](f"Package: from-{n}\n".encode()) for n in served}
    assert aptfetch.fetch(serve(files)) == f"Package: from-{served[0]}\n"


def test_a_plain_index_cut_short_of_its_content_length_is_an_archive_error_not_a_smaller_index(
        serve: Callable[..., str]) -> None:
    """http.client's read1 ends quietly where the connection ends: a plain Packages (no stream end to miss) sent
    short of the Content-Length it announced must not read as a whole index with fewer packages."""
    body = STANZA * 3
    folder = serve({"Packages": body}, length=len(body) + 1)
    with pytest.raises(aptfetch.ArchiveError, match=f"ended after {len(body)} of its {len(body) + 1} bytes"):
        aptfetch.fetch(folder)


def test_a_folder_without_any_index_is_an_archive_error_naming_it(serve: Callable[..., str]) -> None:
    folder = serve({"Release": b"Origin: rif-test\n"})
    with pytest.raises(aptfetch.ArchiveError, match="no Packages index") as caught:
        aptfetch.fetch(folder)
    assert not isinstance(caught.value, aptfetch.Unreachable) and folder in str(caught.value)


@pytest.mark.parametrize("code", [400, 403, 410, 429, 500, 503])
def test_an_error_other_than_404_stops_the_search_naming_the_index(serve: Callable[..., str], code: int) -> None:
    """Only 'not here' moves on to the next compression: a broken archive is not read around."""
    folder = serve({"Packages.gz": PACK["gz"](STANZA)}, statuses={"Packages.xz": code})
    with pytest.raises(aptfetch.ArchiveError, match=rf"Packages\.xz: HTTP {code}$"):
        aptfetch.fetch(folder)


@pytest.mark.parametrize("code", [401, 403, 407, 408, 429, 500, 501, 502, 503, 504, 599])
def test_a_service_that_will_not_serve_now_is_unreachable_with_its_status(serve: Callable[..., str],
                                                                          code: int) -> None:
    """A proxy or gateway in front of the service, an overloaded or rate-limiting service (snapshot.debian.org
    rate-limits and answers 500 after many requests: Debian bugs #977653, #969906): `builder lock` then says the
    ways on of a service it cannot reach."""
    with pytest.raises(aptfetch.Unreachable, match=rf"Packages\.xz: HTTP {code}$"):
        aptfetch.fetch(serve({"Packages.gz": PACK["gz"](STANZA)}, statuses={"Packages.xz": code}))


@pytest.mark.parametrize("code", [400, 410, 416])
def test_an_answer_about_the_request_or_the_archive_is_no_reason_to_go_elsewhere(serve: Callable[..., str],
                                                                                code: int) -> None:
    with pytest.raises(aptfetch.ArchiveError) as caught:
        aptfetch.fetch(serve({"Packages.gz": PACK["gz"](STANZA)}, statuses={"Packages.xz": code}))
    assert not isinstance(caught.value, aptfetch.Unreachable)


def test_a_refused_connection_is_unreachable_naming_the_first_index() -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = f"http://127.0.0.1:{port}{INDEX_PATH}"
    with pytest.raises(aptfetch.Unreachable, match="^" + re.escape(f"{folder}Packages.xz: ")):
        aptfetch.fetch(folder)


def test_the_deadline_is_one_for_the_whole_download_and_ends_the_search(serve: Callable[..., str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A byte every 0.3 s never trips a per-read timeout; the one deadline (read when fetch runs) cuts it, and the
    next compression is not tried after it."""
    monkeypatch.setattr(aptfetch, "DEADLINE_S", 1.0)
    folder = serve({"Packages.xz": PACK["xz"](STANZA), "Packages.gz": PACK["gz"](STANZA)}, drip=0.3)
    start = time.monotonic()
    with pytest.raises(aptfetch.Unreachable, match=r"Packages\.xz: .*no complete answer within 1 s") as caught:
        aptfetch.fetch(folder)
    assert "Packages.gz" not in str(caught.value) and time.monotonic() - start < 10


def test_a_download_of_exactly_64_mib_is_read_and_one_byte_more_is_refused_from_its_length(
        serve: Callable[..., str]) -> None:
    assert len(aptfetch.fetch(serve({"Packages": b"P" * 67108864}))) == 67108864
    with pytest.raises(aptfetch.ArchiveError, match="Packages: 67108865 bytes is more than the 67108864") as caught:
        aptfetch.fetch(serve({"Packages": b"x"}, length=67108865))
    assert not isinstance(caught.value, aptfetch.Unreachable)


# -- _Unpacked: the stream unpacker -----------------------------------------------------------------------------------

def unpack(kind: str, *chunks: bytes) -> str:
    sink = aptfetch._Unpacked(kind, "http://127.0.0.1/Packages")
    for chunk in chunks:
        assert sink.write(chunk) == len(chunk)
    return sink.text()


@pytest.mark.parametrize("kind", ["xz", "gz", "bz2", ""])
def test_an_index_fed_a_byte_at_a_time_unpacks_to_the_same_text(kind: str) -> None:
    text = STANZA * 200
    packed = PACK[kind](text)
    assert unpack(kind, *(packed[i:i + 1] for i in range(len(packed)))) == text.decode()


@pytest.mark.parametrize("kind", ["xz", "gz", "bz2"])
def test_concatenated_streams_are_all_read(kind: str) -> None:
    first, second = STANZA, STANZA.replace(b"rif-a", b"rif-b")
    assert unpack(kind, PACK[kind](first) + PACK[kind](second)) == (first + second).decode()
    assert unpack(kind, PACK[kind](first), PACK[kind](second)) == (first + second).decode()  # one chunk each


@pytest.mark.parametrize("kind", ["xz", "gz", "bz2"])
def test_a_stream_cut_short_or_empty_is_an_error_at_its_end(kind: str) -> None:
    packed = PACK[kind](STANZA * 50)
    with pytest.raises(aptfetch.ArchiveError, match=f"the {kind} stream ends early"):
        unpack(kind, packed[: len(packed) - 4])
    with pytest.raises(aptfetch.ArchiveError, match=f"the {kind} stream ends early"):
        unpack(kind)
    with pytest.raises(aptfetch.ArchiveError, match=f"not a valid {kind} stream"):  # a complete stream, then junk
        unpack(kind, packed + b"\x00junk after the stream")


def test_an_empty_plain_index_is_empty_and_bad_utf8_is_replaced() -> None:
    assert unpack("") == ""
    assert unpack("", b"Package: rif-\xff\n") == "Package: rif-\ufffd\n"


def test_a_plain_index_is_read_up_to_exactly_256_mib_and_refused_one_byte_past() -> None:
    sink = aptfetch._Unpacked("", "http://127.0.0.1/Packages")
    mib = b"\0" * (1 << 20)
    for _ in range(256):  # the same chunk object each time: 256 MiB counted, 1 MiB held
        sink.write(mib)
    assert sink.size == 268435456
    with pytest.raises(aptfetch.ArchiveError, match=r"Packages: more than 268435456 bytes unpacked: refused"):
        sink.write(b"\0")


@pytest.mark.parametrize("kind", ["xz", "gz", "bz2"])
def test_one_chunk_that_unpacks_past_the_cap_is_never_held_whole(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each decompress call gets the room left plus one byte: an 8 MiB bomb in one small chunk holds 1001 bytes at
    most under a 1000-byte cap, where a one-call unpack would hold all 8 MiB before counting."""
    monkeypatch.setattr(aptfetch, "MAX_INDEX_BYTES", 1000)
    bomb = PACK[kind](b"\0" * (8 << 20))
    assert len(bomb) < 100_000
    sink = aptfetch._Unpacked(kind, "http://127.0.0.1/Packages")
    with pytest.raises(aptfetch.ArchiveError, match="more than 1000 bytes unpacked"):
        sink.write(bomb)
    assert 1000 < sink.size <= 1001 and sum(map(len, sink.parts)) <= 1000


@pytest.mark.parametrize("kind", ["xz", "gz", "bz2"])
def test_exactly_the_cap_unpacked_is_read(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aptfetch, "MAX_INDEX_BYTES", 1000)
    assert unpack(kind, PACK[kind](b"a" * 1000)) == "a" * 1000
    with pytest.raises(aptfetch.ArchiveError, match="more than 1000 bytes unpacked"):
        unpack(kind, PACK[kind](b"a" * 1001))
