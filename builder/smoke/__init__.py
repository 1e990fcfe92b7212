"""The in-image smoke test: the torch_smoke package, baked into every image as one runnable zipapp.

bundle() makes the zipapp byte for byte the same on every call and every host (fixed timestamps and
modes, sorted entries, no compression, so no zlib version shows), because the image's content hash covers
it: the same sources must give the same hash.
"""

from __future__ import annotations

import io
import zipfile
from importlib import resources

PROGRAM = "torch-smoke.pyz"  # its name in the image, under /opt/rif
PACKAGE = "torch_smoke"  # the package's name inside the zipapp (top level, so its imports are relative)
SHEBANG = b"#!/usr/bin/env python3\n"  # the image's PATH puts /opt/venv/bin first: the python that has torch
ENTRY = (b'"""torch-smoke as one file: runs the torch_smoke package next to this entry point."""\n\n'
         b"from torch_smoke.__main__ import run\n\nrun()\n")
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def sources() -> dict[str, bytes]:
    """The zipapp's entries, name -> bytes: the package's modules and the entry point."""
    package = resources.files(__name__).joinpath(PACKAGE)
    files = {f"{PACKAGE}/{p.name}": p.read_bytes() for p in package.iterdir() if p.name.endswith(".py")}
    return {"__main__.py": ENTRY, **files}


def bundle() -> bytes:
    """The zipapp: a shebang line, then a zip archive Python runs as `python3 torch-smoke.pyz`."""
    out = io.BytesIO()
    out.write(SHEBANG)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for name, data in sorted(sources().items()):
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.compress_type, info.create_system, info.external_attr = zipfile.ZIP_STORED, 3, 0o644 << 16
            archive.writestr(info, data)
    return out.getvalue()
