"""Image layers made in a test: a gzip'd tar of a few files, as an OCI layer blob (tar+gzip) is laid out."""

from __future__ import annotations

import gzip
import io
import tarfile


def layer(files: dict[str, bytes], mtime: int = 0) -> bytes:
    """The blob of a layer holding these files (regular files, one mtime), gzip's own header time zeroed."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()
