"""Image layers made without an engine: a gzip'd tar of a few files, as an OCI layer blob (tar+gzip) is laid out.

Byte-reproducible (names sorted; fixed owner, mode and times; gzip's header time zeroed), so the same files give the
same digest: bench_night's registry fill and bench_sign's images (benchmarks/support), and the tests that build a
manifest by hand or put a tampered layer into a registry.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile


def layer(files: dict[str, bytes], mtime: int = 0) -> tuple[bytes, str]:
    """The layer's blob and the sha256 of its uncompressed tar (its diff ID, as an image config lists it)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, mtime
            tar.addfile(info, io.BytesIO(data))
    plain = raw.getvalue()
    return gzip.compress(plain, mtime=0), "sha256:" + hashlib.sha256(plain).hexdigest()


def blob(files: dict[str, bytes], mtime: int = 0) -> bytes:
    """The layer's blob alone."""
    return layer(files, mtime)[0]
