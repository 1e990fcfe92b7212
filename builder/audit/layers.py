"""A published layer read as hostile data: what it holds, path by path, with memory and time bounded.

tarfile reads a pax or GNU long-name header whole into memory and follows a GNU sparse map block after block;
both are capped or refused here, as are the number of paths, the unpacked bytes and the time spent.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import math
import tarfile
import time
import zlib
from dataclasses import dataclass
from typing import IO, Any

import zstandard

from builder.registry.client import LAYER_DEADLINE_S

MAX_HEADER_BYTES = 1 << 20  # a pax or GNU long-name header: a path of a few KB, never a MB
MAX_ENTRIES = 1_000_000  # paths in one layer (ROCm's largest has a few hundred thousand): about 0.5 GB of entries
MAX_TAR_BYTES = 256 << 30  # one layer's tar stream, decompressed: a gzip bomb ends here, or at the deadline
_EXTENDED = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
             tarfile.SOLARIS_XHDTYPE)


class LayerError(RuntimeError):
    """A layer or manifest that cannot be compared: not a tar, or past a limit. One line, never a traceback."""


@dataclass(frozen=True)
class Entry:
    """What a layer says of one path: enough to tell two versions apart."""

    kind: str
    mode: int
    owner: str
    mtime: int
    size: int
    link: str
    sha256: str


def entries(blob: IO[bytes], deadline_s: float = LAYER_DEADLINE_S) -> dict[str, Entry]:
    """What a layer holds, path by path. A LayerError when it is no tar (or no gzip/zstd of one), or past a
    limit (MAX_HEADER_BYTES, MAX_ENTRIES, MAX_TAR_BYTES, deadline_s): memory and time stay bounded."""
    out: dict[str, Entry] = {}
    stream = _Capped(_decompressed(blob), MAX_TAR_BYTES, deadline_s)
    try:
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_Member) as tar:
            for member in tar:
                digest = ""
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is not None:
                    sha = hashlib.sha256()
                    while chunk := handle.read(1 << 20):
                        sha.update(chunk)
                    digest = sha.hexdigest()
                kind = "file" if member.isfile() else "dir" if member.isdir() else "link" if member.issym() else \
                    "hardlink" if member.islnk() else "other"
                name = member.name.removeprefix("./")
                if name not in out and len(out) >= MAX_ENTRIES:
                    raise LayerError(f"a layer of more than {MAX_ENTRIES} paths: not compared")
                mtime = member.mtime if math.isfinite(member.mtime) else -1  # a pax header may say nan or inf
                out[name] = Entry(kind, member.mode, f"{member.uid}:{member.gid}", int(mtime), member.size,
                                  member.linkname, digest)
    except (tarfile.TarError, zlib.error, zstandard.ZstdError, EOFError, OSError, ValueError,
            OverflowError) as exc:
        raise LayerError(f"a layer that is not a readable tar archive: {type(exc).__name__}: {exc}"[:300]) from None
    return out


class _Member(tarfile.TarInfo):
    """A tar header from a layer anyone may have written. tarfile reads a pax or GNU long-name header whole
    into memory (a 1 MB gzip says 1 GB), and a GNU sparse map block after block without end: the first is
    refused past MAX_HEADER_BYTES, the second always (BuildKit writes neither)."""

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise LayerError("a layer with a GNU sparse member: not compared")
        if self.type in _EXTENDED and self.size > MAX_HEADER_BYTES:
            raise LayerError(f"a layer with a {self.size}-byte extended header (at most {MAX_HEADER_BYTES} read): "
                             "not compared")
        found: tarfile.TarInfo = tarfile.TarInfo._proc_member(self, tar)  # type: ignore[attr-defined]
        return found

    def _proc_gnusparse_10(self, next: tarfile.TarInfo, pax_headers: dict[str, str], tar: tarfile.TarFile) -> None:
        raise LayerError("a layer with a GNU sparse member: not compared")


class _Capped(io.RawIOBase):
    """A layer's tar stream that ends (LayerError) past limit bytes or deadline_s: a decompression bomb is
    read for a bounded time."""

    def __init__(self, stream: IO[bytes], limit: int, deadline_s: float) -> None:
        super().__init__()
        self._stream, self._limit, self._left, self._seconds = stream, limit, limit, deadline_s
        self._end = time.monotonic() + deadline_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if time.monotonic() > self._end:
            raise LayerError(f"a layer not read within {self._seconds:g} s: not compared")
        view = memoryview(buffer).cast("B")
        data = self._stream.read(min(len(view), self._left + 1))
        if len(data) > self._left:
            raise LayerError(f"a layer of more than {self._limit} bytes unpacked: not compared")
        self._left -= len(data)
        view[:len(data)] = data
        return len(data)


def _decompressed(blob: IO[bytes]) -> IO[bytes]:
    """The layer's tar stream, gzip or zstd by its magic bytes (blob: seekable, a file or a buffer)."""
    magic = blob.read(4)
    blob.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=blob)  # type: ignore[return-value]
    if magic == b"\x28\xb5\x2f\xfd":
        return zstandard.ZstdDecompressor().stream_reader(blob)
    return blob
