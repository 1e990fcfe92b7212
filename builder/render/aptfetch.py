"""An apt archive's Packages index, downloaded as hostile input: bounded in bytes, unpacked bytes and time.

The download goes through the registry transport's bounded reader (builder.registry.transport.request: its
compressed size capped, one deadline for the whole request, a watchdog that cuts a server dripping a byte every few
seconds), and each chunk is unpacked as it comes with the output capped (a decompression bomb never reaches
memory: no one-call unpack). Corrupt data (a bad xz stream, a gzip whose CRC does not match, a stream cut short) is
one ArchiveError naming the index.
"""

from __future__ import annotations

import bz2
import lzma
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from typing import IO, Any, cast

from builder.core.aptindex import ArchiveError, Unreachable
from builder.core.text import printable
from builder.registry import transport
from builder.registry.errors import TRANSIENT_STATUS, RegistryError

# Debian bookworm's main/binary-amd64 index (deb.debian.org, 2026-11-28): Packages.xz 8,790,396 bytes, unpacked
# 50,060,337 bytes. The caps leave room for a larger archive and stop a bomb long before memory runs out.
MAX_COMPRESSED_BYTES = 64 << 20
MAX_INDEX_BYTES = 256 << 20
DEADLINE_S = 300.0  # one index's whole download (connect, every byte), not one read
NAMES = ("Packages.xz", "Packages.gz", "Packages.bz2", "Packages")


GATEWAY_REFUSALS = frozenset({401, 403, 407})  # a proxy or gateway that will not let this client through


def refuses(code: int) -> bool:
    """An answer that says the service will not serve this client now, not that the archive is broken: a proxy or
    gateway between an air-gapped site and the service (GATEWAY_REFUSALS, 502, 504), what a registry would be
    retried on (TRANSIENT_STATUS: an overloaded or rate-limiting service, 408) or any other error of its server
    (5xx; snapshot.debian.org rate-limits and answers 500 after many requests: Debian bugs #977653, #969906).
    The ways on are those of a service that cannot be reached (oslock.unreachable)."""
    return code in TRANSIENT_STATUS or code in GATEWAY_REFUSALS or 500 <= code <= 599


def fetch(folder: str) -> str:
    """The folder's Packages index, in the first compression it serves, read bounded and unpacked as a stream."""
    for name in NAMES:
        url = folder + name
        sink = _Unpacked(name.partition(".")[2], url)
        request = urllib.request.Request(url, headers={"Accept-Encoding": "identity"})
        try:
            transport.request(request, MAX_COMPRESSED_BYTES, url, DEADLINE_S, sink=cast(IO[bytes], sink))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                continue
            if refuses(exc.code):
                raise Unreachable(f"{url}: HTTP {exc.code}") from None
            raise ArchiveError(f"{url}: HTTP {exc.code}") from None
        except (RegistryError, transport.CutShort) as exc:  # past the compressed cap; a body cut short
            raise ArchiveError(printable(exc)) from None
        except (urllib.error.URLError, OSError) as exc:  # no name, refused, reset, the deadline (TimeoutError)
            raise Unreachable(f"{url}: {printable(getattr(exc, 'reason', exc))}") from None
        return sink.text()
    raise ArchiveError(f"{folder}: no Packages index")


_MAKE: dict[str, Callable[[], Any]] = {"xz": lzma.LZMADecompressor, "bz2": bz2.BZ2Decompressor,
                                       "gz": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS)}


class _Unpacked:
    """Where the download goes, chunk by chunk: unpacked as it comes (xz, gzip with its CRC checked, bzip2, or
    plain), never past MAX_INDEX_BYTES whatever a chunk claims to unpack to; a bad stream is an ArchiveError."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind, self.url, self.size, self.ended = kind, url, 0, True
        self.parts: list[bytes] = []
        self._unpacker = _MAKE[kind]() if kind else None

    def write(self, chunk: bytes) -> int:
        try:
            self._feed(chunk)
        except (lzma.LZMAError, zlib.error, OSError, EOFError, ValueError) as exc:
            raise ArchiveError(f"{self.url}: not a valid {self.kind} stream: {printable(exc)}"[:400]) from None
        return len(chunk)

    def _feed(self, data: bytes) -> None:
        if self._unpacker is None:
            self._add(data)
            return
        while data:
            self.ended = False
            unpacker = self._unpacker
            if hasattr(unpacker, "unconsumed_tail"):  # zlib: what it did not unpack yet comes back
                self._add(unpacker.decompress(data, self._room()))
                while unpacker.unconsumed_tail and not unpacker.eof:
                    self._add(unpacker.decompress(unpacker.unconsumed_tail, self._room()))
            else:  # lzma, bz2: they keep it
                self._add(unpacker.decompress(data, self._room()))
                while not unpacker.eof and not unpacker.needs_input:
                    self._add(unpacker.decompress(b"", self._room()))
            data = b""
            if unpacker.eof:  # the next stream of a concatenated file (gzip and xz allow several)
                data, self.ended, self._unpacker = unpacker.unused_data, True, _MAKE[self.kind]()

    def _room(self) -> int:
        """One byte past the cap at most: a bomb's next chunk is refused, never held."""
        return MAX_INDEX_BYTES - self.size + 1

    def _add(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > MAX_INDEX_BYTES:
            raise ArchiveError(f"{self.url}: more than {MAX_INDEX_BYTES} bytes unpacked: refused")
        self.parts.append(data)

    def text(self) -> str:
        """The unpacked index; a stream cut short (no end of stream) is an ArchiveError."""
        if self._unpacker is not None and (not self.ended or not self.parts):
            raise ArchiveError(f"{self.url}: the {self.kind} stream ends early: a corrupt or cut index")
        return b"".join(self.parts).decode("utf-8", errors="replace")
