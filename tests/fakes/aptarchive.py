"""A loopback apt snapshot archive: dated folders `<root>/<TIMESTAMP>/dists/<codename>/main/binary-amd64/`, each with
a Packages index (gzip) and a Release file listing its SHA256, served by `python3 -m http.server` on 127.0.0.1.

Packages are tiny real .debs (dpkg-deb --build), or, for tests that only resolve, index entries alone. `served` is
the archive the OS lock tests lock a Debian 12 and a Debian 13 combination against: two dated snapshots of two suites.
"""

from __future__ import annotations

import gzip
import hashlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.core import aptindex
from testkit.serving import POLL_S


@dataclass(frozen=True)
class Deb:
    name: str
    version: str
    depends: str = ""
    priority: str = "optional"
    provides: str = ""


def _control(deb: Deb, size: int, sha: str) -> str:
    lines = [f"Package: {deb.name}", f"Version: {deb.version}", "Architecture: all", f"Priority: {deb.priority}",
             "Maintainer: rif tests <rif@example.invalid>", f"Description: fake {deb.name}"]
    lines += [f"Depends: {deb.depends}"] if deb.depends else []
    lines += [f"Provides: {deb.provides}"] if deb.provides else []
    if sha:
        lines += [f"Filename: pool/{deb.name}_{deb.version}_all.deb", f"Size: {size}", f"SHA256: {sha}"]
    return "\n".join(lines) + "\n"


def build_deb(deb: Deb, pool: Path) -> Path:
    """A real, installable .deb that puts one file under /usr/share/<name>/ (made once: a snapshot's files stay)."""
    out = pool / f"{deb.name}_{deb.version}_all.deb"
    if out.exists():
        return out
    src = pool.parent / f".src-{deb.name}-{deb.version}"
    (src / "DEBIAN").mkdir(parents=True)
    (src / "DEBIAN" / "control").write_text(_control(deb, 0, ""))
    (src / "usr" / "share" / deb.name).mkdir(parents=True)
    (src / "usr" / "share" / deb.name / "version").write_text(deb.version + "\n")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(src), str(out)], check=True,
                   capture_output=True)
    return out


def write_snapshot(root: Path, stamp: str, codename: str, debs: list[Deb], real: bool = False) -> None:
    """One dated snapshot of one suite: its index (and .debs when real) and a Release naming the index's hash. A
    snapshot never changes, so builder.core.aptindex keeps what it read: a test that rewrites one (or serves another
    archive on a port an earlier one had) makes this process read it again."""
    aptindex.forget()
    top = root / stamp
    pool = top / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    entries = []
    for deb in debs:
        if real:
            data = build_deb(deb, pool).read_bytes()
            entries.append(_control(deb, len(data), hashlib.sha256(data).hexdigest()))
        else:
            entries.append(_control(deb, 1, hashlib.sha256(f"{deb.name}{deb.version}".encode()).hexdigest()))
    folder = top / "dists" / codename / "main" / "binary-amd64"
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(entries).encode()
    (folder / "Packages").write_bytes(text)
    (folder / "Packages.gz").write_bytes(gzip.compress(text, mtime=0))
    hashes = "".join(f" {hashlib.sha256(p.read_bytes()).hexdigest()} {p.stat().st_size} main/binary-amd64/{p.name}\n"
                     for p in (folder / "Packages", folder / "Packages.gz"))
    (top / "dists" / codename / "Release").write_text(
        f"Origin: rif-test\nLabel: rif-test\nSuite: {codename}\nCodename: {codename}\n"
        "Date: Sun, 01 Nov 2026 00:00:00 UTC\nArchitectures: amd64 all\nComponents: main\nSHA256:\n" + hashes)


class Served:
    """`python3 -m http.server` on a free loopback port, serving root."""

    def __init__(self, root: Path) -> None:
        aptindex.forget()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(self.port),
                                      "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("http.server did not start")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class RawIndex:
    """An in-process loopback HTTP server answering each path with the bytes given, as a hostile archive would:
    a body that is no stream of its kind, a Content-Length it never sends, a byte every `drip` seconds, or an
    error status (`statuses`), or one status for every path (`refuse_all`: a gateway in front of a service it cannot
    reach, a service that rate-limits). Paths it does not know answer 404 (apt's Packages.xz, .gz, .bz2, plain: the
    first one served is read)."""

    def __init__(self, bodies: dict[str, bytes], *, drip: float = 0.0, length: int | None = None,
                 statuses: dict[str, int] | None = None, refuse_all: int | None = None) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = bodies.get(self.path)
                if refuse_all is not None:
                    self.send_error(refuse_all)
                    return
                if self.path in (statuses or {}):  # an archive's error answer (500, 403) for that path
                    self.send_error((statuses or {})[self.path])
                    return
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(length if length is not None else len(body)))
                self.end_headers()
                for i in range(len(body)) if drip else ():
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(drip)
                if not drip:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        aptindex.forget()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


INDEX_PATH = "/dists/bookworm/main/binary-amd64/"  # where a Source(url, "bookworm", ("main",)) reads its index


T1, T2 = "20261101T000000Z", "20261201T000000Z"
# What the OS lock tests' combinations install (runtime, venv and devel steps), by the names and dependency shapes of
# Debian 12's own packages (libc6 Priority: required, build-essential's `gcc | c-compiler`), at their upstream
# versions there (epochs and most Debian revisions left out).
COMMON = [Deb("libc6", "2.36-9", priority="required"), Deb("python3", "3.11.2-1", "libpython3-stdlib, libc6"),
          Deb("libpython3-stdlib", "3.11.2-1"), Deb("ca-certificates", "20230311", "openssl (>= 3)"),
          Deb("python3-venv", "3.11.2-1", "python3"), Deb("python3-pip-whl", "23.0.1"),
          Deb("python3-setuptools-whl", "66.1.1"), Deb("build-essential", "12.9", "gcc | c-compiler"),
          Deb("gcc", "12.2.0", provides="c-compiler"), Deb("python3-dev", "3.11.2-1", "python3"),
          Deb("git", "2.39.5"), Deb("ninja-build", "1.11.1")]


def two_snapshots(root: Path) -> None:
    """bookworm and trixie at T1; at T2 trixie's openssl moved (3.5.1-1 -> 3.5.4-1) and bookworm gained a package no
    image installs (cowsay): one closure moved, the other's index changed under it."""
    write_snapshot(root, T1, "bookworm", [*COMMON, Deb("openssl", "3.0.11-1")])
    write_snapshot(root, T1, "trixie", [*COMMON, Deb("openssl", "3.5.1-1")])
    write_snapshot(root, T2, "bookworm", [*COMMON, Deb("openssl", "3.0.11-1"), Deb("cowsay", "3.03")])
    write_snapshot(root, T2, "trixie", [*COMMON, Deb("openssl", "3.5.4-1")])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """two_snapshots, served on loopback for one test: the archive's URL."""
    two_snapshots(tmp_path / "archive")
    server = Served(tmp_path / "archive")
    yield server.url
    server.close()
