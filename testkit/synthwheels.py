"""Synthetic wheels, the one writer of them for tests and benchmarks.

Tests get small wheels shaped like TheRock's split: torch (the common part, with per-target extras) and one
device package per gfx target, so they can build family images without multi-GB downloads. The ROCm-scale
benchmarks (benchmarks/support/rocmwheels.py) write wheels of gigabytes through the same `write`, which streams each
file's chunks into the archive and hashes them on the way, so no payload is ever held in memory whole."""

from __future__ import annotations

import base64
import hashlib
import http.server
import re
import secrets
import threading
import zipfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from testkit.serving import POLL_S

TORCH = "2.13.0"
WHEEL_FILE = b"Wheel-Version: 1.0\nGenerator: rif-synthwheels\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
EPOCH = (2020, 1, 1, 0, 0, 0)  # every member's time: the same inputs give the same bytes


def _record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def metadata(name: str, version: str, requires: list[str] | None = None,
             extras: dict[str, list[str]] | None = None, summary: str | None = None) -> bytes:
    """METADATA: plain requirements, then each extra with the requirements it adds."""
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Summary: {summary}"] if summary else []
    meta += [f"Requires-Dist: {r}" for r in requires or []]
    for extra, reqs in (extras or {}).items():
        meta += [f"Provides-Extra: {extra}", *(f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs)]
    return ("\n".join(meta) + "\n").encode()


def write(path: Path, info: str, files: Iterable[tuple[str, Iterable[bytes]]], level: int | None = None) -> Path:
    """A wheel at path: each (name, chunks) streamed in and hashed as it goes, then RECORD (info: the
    .dist-info folder) with every file's hash and size, as pip checks them on install. Members are stored as
    they are, or deflated at level when one is given."""
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for name, chunks in files:
            member = zipfile.ZipInfo(name, date_time=EPOCH)
            if level is not None:
                member.compress_type = zipfile.ZIP_DEFLATED
                member._compresslevel = level  # type: ignore[attr-defined]  # compress_level from Python 3.13
            digest, size = hashlib.sha256(), 0
            with archive.open(member, "w", force_zip64=True) as out:
                for chunk in chunks:
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            record.append(f"{name},{_record_hash(digest.digest())},{size}\n")
        record.append(f"{info}/RECORD,,\n")
        archive.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=EPOCH), "".join(record))
    return path


def wheel(dest: Path, name: str, version: str, requires: list[str] | None = None,
          extras: dict[str, list[str]] | None = None, payload: bytes = b"") -> Path:
    """A valid pure-Python wheel pip installs: a package with one data file, METADATA, WHEEL and RECORD."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = [(f"{dist}/__init__.py", [f"__version__ = {version!r}\n".encode()]), (f"{dist}/payload.bin", [payload]),
             (f"{info}/METADATA", [metadata(name, version, requires, extras)]), (f"{info}/WHEEL", [WHEEL_FILE])]
    return write(dest / f"{dist}-{version}-py3-none-any.whl", info, files)


def therock_like(dest: Path, targets: list[str], payload: int = 4096, numpy: str = "2.4.6", salt: bytes = b"",
                 device_bytes: int | None = None) -> list[Path]:
    """torch (depending on a common library package, extras device-<target>), the device packages, numpy. A salt
    starts every payload (other bytes, other BuildKit cache keys); device_bytes sizes each device package."""
    dest.mkdir(parents=True, exist_ok=True)
    extras = {f"device-{t}": [f"rif-device-{t}=={TORCH}"] for t in targets}
    made = [wheel(dest, "torch", TORCH, ["rif-rocm-libraries==1.0"], extras, salt + b"t" * payload),
            wheel(dest, "rif-rocm-libraries", "1.0", payload=salt + b"l" * payload),
            wheel(dest, "numpy", numpy, payload=salt + b"n" * 64)]
    for t in targets:
        size = len(t) * payload if device_bytes is None else device_bytes
        device = (t.encode() * (size // len(t) + 1))[:size]
        made.append(wheel(dest, f"rif-device-{t}", TORCH, payload=salt + device))
    return made


class WheelIndex:
    """A PEP 503 simple index of a folder of wheels, served over HTTP where BuildKit's RUN steps reach it
    (loopback: builds run on the host network), with PyPI's caching headers; it counts each download."""

    def __init__(self, wheels: Path, host: str) -> None:
        self.wheels, self.downloads = wheels, Counter[str]()
        self.prefix = f"i{secrets.token_hex(6)}"  # pip caches files by URL: no other test's bytes under this one
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body, kind = index.answer(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", kind)
                self.send_header("Cache-Control", "max-age=365000000, immutable, public")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def do_HEAD(self) -> None:  # a file's size, as an index answers it (not a download)
                parts = index.parts(self.path)
                found = index.wheels / parts[-1] if len(parts) == 3 and parts[0] == "files" else None
                ok = found is not None and found.is_file()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Length", str(found.stat().st_size if found is not None and ok else 0))
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/{self.prefix}/simple/"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()

    def parts(self, path: str) -> list[str]:
        """The path's segments after this index's prefix (none for a path outside it)."""
        parts = [p for p in path.split("?")[0].split("/") if p]
        return parts[1:] if parts[:1] == [self.prefix] else []

    def answer(self, path: str) -> tuple[bytes | None, str]:
        parts = self.parts(path)
        if len(parts) == 3 and parts[0] == "files" and (self.wheels / parts[2]).is_file():
            self.downloads[parts[2]] += 1
            return (self.wheels / parts[2]).read_bytes(), "application/octet-stream"
        if len(parts) == 2 and parts[0] == "simple":
            project = re.sub(r"[-_.]+", "-", parts[1]).lower()
            links = [f'<a href="/{self.prefix}/files/{project}/{w.name}">{w.name}</a>'
                     for w in sorted(self.wheels.glob("*.whl"))
                     if re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() == project]
            return f"<html><body>{''.join(links)}</body></html>".encode(), "text/html"
        return None, "text/plain"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def rebrand(wheel: Path, version: str, dest: Path) -> Path:
    """The same wheel under another version: a newer numpy, as an index would serve one."""
    name, old = wheel.name.split("-")[:2]
    out = dest / wheel.name.replace(f"-{old}-", f"-{version}-")
    records: list[str] = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            path = info.filename.replace(f"{name}-{old}.dist-info/", f"{name}-{version}.dist-info/")
            if path.endswith(".dist-info/RECORD"):
                record = path
                continue
            data = src.read(info)
            if path.endswith(".dist-info/METADATA"):
                data = data.replace(f"\nVersion: {old}\n".encode(), f"\nVersion: {version}\n".encode(), 1)
            dst.writestr(path, data)
            records.append(f"{path},{_record_hash(hashlib.sha256(data).digest())},{len(data)}")
        dst.writestr(record, "\n".join([*records, f"{record},,"]) + "\n")
    return out


def with_a_corrupt_wheel(wheelhouse: Path, dest: Path, name: str = "torch", version: str = "2.12.0",
                         python: str = "cp311") -> Path:
    """wheelhouse's wheels (hard links, else copies) and one wheel that is no zip: a build that installs it passes
    the preflight (name, version and tags are right) and fails in pip, inside the bake."""
    import os
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for found in wheelhouse.glob("*.whl"):
        try:
            os.link(found, dest / found.name)
        except OSError:
            shutil.copy2(found, dest / found.name)
    (dest / f"{name}-{version}-{python}-{python}-manylinux_2_28_x86_64.whl").write_bytes(b"not a zip file\n")
    return dest
