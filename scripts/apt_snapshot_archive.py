#!/usr/bin/env python3
"""A loopback stand-in for snapshot.debian.org: dated apt archives of real Debian packages, on 127.0.0.1.

    python3 scripts/apt_snapshot_archive.py serve --root DIR [--port 8127] [--mirror URL]
    python3 scripts/apt_snapshot_archive.py bump --root DIR --time T NAME [--from T0] [--suffix +rif1]

`serve` answers `http://127.0.0.1:PORT/<TIMESTAMP>/dists/<suite>/...` from index files frozen from the mirror (the
host's Debian mirror, read from its apt sources) the first time that timestamp and suite are asked for: the suite's
main/binary-amd64 Packages.xz, kept as it was, and an unsigned Release naming its hash. A timestamp never changes
afterwards, as a snapshot does not (`bump` aside). `<TIMESTAMP>/pool/...` is the mirror's pool (a redirect: a .deb
is immutable by name and version), or a package `bump` added. The archive is unsigned: lock with
RIF_APT_SNAPSHOT_TRUSTED=yes.

`bump` makes "a newer version appears": it takes NAME's .deb as the timestamp's index has it, repacks it as
VERSION+rif1 (same files, same dependencies) and adds it to that timestamp's index beside the old version (with
`--from T0`, a new timestamp T is first made as a copy of T0's indexes: the archive as at T0, plus the new package).
It prints `NAME=NEWVERSION`.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import hashlib
import http.server
import lzma
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from debian import deb822, debian_support

TIMESTAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z")
SUITE = re.compile(r"[a-z][a-z0-9.-]{0,40}")
FOLDER = "main/binary-amd64"
LOCAL_POOL = "pool/rif"  # where bumped packages live, under the archive root (never the mirror's pool)


def host_mirror() -> str:
    """The host's Debian mirror (its apt sources), as `builder base` reads it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from builder.buildkit import baseimage

    found = baseimage.host_mirror("debian")
    if found is None:
        raise SystemExit("no Debian mirror in the host's apt sources (/etc/apt/sources.list*); pass --mirror URL")
    return found


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """One writer at a time (the server freezing, a bump) over the whole archive."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        data: bytes = response.read()
        return data


def release(suite: str, stamp: str, indexes: dict[str, bytes]) -> str:
    """An unsigned Release naming the index, packed and unpacked (apt checks both hashes, and looks for an index by
    its unpacked name); arch:all packages are in binary-amd64."""
    date = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).strftime("%a, %d %b %Y %H:%M:%S UTC")
    unpacked = gzip.decompress(indexes["Packages.gz"]) if "Packages.gz" in indexes else lzma.decompress(
        indexes["Packages.xz"])
    hashes = "".join(f" {hashlib.sha256(data).hexdigest()} {len(data)} {FOLDER}/{name}\n"
                     for name, data in sorted({**indexes, "Packages": unpacked}.items()))
    return (f"Origin: rif-loopback-snapshot\nLabel: rif-loopback-snapshot\nSuite: {suite}\nCodename: {suite}\n"
            f"Date: {date}\nArchitectures: amd64 all\nComponents: main\n"
            "No-Support-for-Architecture-all: Packages\nAcquire-By-Hash: no\n"
            f"SHA256:\n{hashes}")


def write_suite(root: Path, stamp: str, suite: str, indexes: dict[str, bytes]) -> None:
    """The suite's indexes and Release at the timestamp, replaced as a whole (a reader never sees half of it)."""
    folder = root / stamp / "dists" / suite
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{suite}-"))
    (staging / FOLDER).mkdir(parents=True)
    for name, data in indexes.items():
        (staging / FOLDER / name).write_bytes(data)
    (staging / "Release").write_text(release(suite, stamp, indexes))
    staging.chmod(0o755)
    old = folder.with_name(f".{suite}-old")
    if folder.exists():
        folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def packages_text(folder: Path) -> str:
    """The suite's Packages index, as frozen (xz) or as a bump rewrote it (gzip: seconds, where xz takes a minute)."""
    if (folder / "Packages.gz").exists():
        return gzip.decompress((folder / "Packages.gz").read_bytes()).decode("utf-8")
    return lzma.decompress((folder / "Packages.xz").read_bytes()).decode("utf-8")


def freeze(root: Path, stamp: str, suite: str, mirror: str) -> None:
    """The mirror's index of the suite, now, as the timestamp's, unless that timestamp has it already."""
    with locked(root):
        if (root / stamp / "dists" / suite / "Release").exists():
            return
        url = f"{mirror.rstrip('/')}/dists/{suite}/{FOLDER}/"
        try:
            indexes = {"Packages.xz": fetch(url + "Packages.xz")}
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            indexes = {"Packages.gz": fetch(url + "Packages.gz")}  # a small mirror without xz
        write_suite(root, stamp, suite, indexes)


def bump(root: Path, stamp: str, suite: str, name: str, suffix: str, mirror: str, start: str | None) -> str:
    """NAME's newest .deb at the timestamp, repacked as VERSION+SUFFIX and added to the timestamp's index (once: a
    second bump of the same package and suffix adds nothing)."""
    freeze(root, start or stamp, suite, mirror)
    with locked(root):
        at = stamp if (root / stamp / "dists" / suite / "Release").exists() else str(start)  # new: as at --from
        text = packages_text(root / at / "dists" / suite / FOLDER)
        stanzas = [deb822.Packages(block) for block in text.split("\n\n") if block.startswith(f"Package: {name}\n")]
        originals = [p for p in stanzas if not p["Version"].endswith(suffix)]
        if not originals:
            raise SystemExit(f"{name}: not in {suite} at {at}")
        old = max(originals, key=lambda p: debian_support.Version(p["Version"]))
        version = f"{old['Version']}{suffix}"
        added = not any(p["Version"] == version for p in stanzas)
        if added:
            text = text.rstrip("\n") + "\n\n" + repacked(old, version, root, mirror).dump()
        if added or at != stamp:
            write_suite(root, stamp, suite, {"Packages.gz": gzip.compress(text.encode("utf-8"), 6, mtime=0)})
    return f"{name}={version}"


def repacked(old: deb822.Packages, version: str, root: Path, mirror: str) -> deb822.Packages:
    """The index entry of old's .deb repacked at version (its file under pool/rif/)."""
    where = old["Filename"]
    local = where.startswith(LOCAL_POOL + "/")
    original = (root / where).read_bytes() if local else fetch(f"{mirror.rstrip('/')}/{where}")
    deb = repack(original, version, root)
    new = deb822.Packages(old)
    new["Version"] = version
    new["Filename"] = str(deb.relative_to(root))
    new["Size"] = str(deb.stat().st_size)
    for field, algorithm in (("MD5sum", "md5"), ("SHA1", "sha1"), ("SHA256", "sha256")):
        if field in new:
            new[field] = hashlib.new(algorithm, deb.read_bytes()).hexdigest()
    return new


def repack(original: bytes, version: str, root: Path) -> Path:
    """The same package at another version: its files and control as they were, the Version field changed (made
    once: a .deb is immutable by name and version)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "in.deb").write_bytes(original)
        subprocess.run(["dpkg-deb", "-R", str(work / "in.deb"), str(work / "tree")], check=True)
        control = work / "tree" / "DEBIAN" / "control"
        control.write_text(re.sub(r"(?m)^Version: .*$", f"Version: {version}", control.read_text()))
        name = re.search(r"(?m)^Package: (\S+)$", control.read_text())
        arch = re.search(r"(?m)^Architecture: (\S+)$", control.read_text())
        assert name and arch, "a .deb's control names its package and architecture"
        out = root / LOCAL_POOL / f"{name[1]}_{version.replace(':', '%3a')}_{arch[1]}.deb"
        if out.exists():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(work / "tree"), str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def handler(root: Path, mirror: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Archive(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer(body=True)

        def do_HEAD(self) -> None:
            self.answer(body=False)

        def answer(self, body: bool) -> None:
            parts = urllib.parse.unquote(self.path.split("?", 1)[0]).lstrip("/").split("/")  # apt sends + as %2b
            if len(parts) < 3 or not TIMESTAMP.fullmatch(parts[0]) or ".." in parts:
                return self.send_error(404)
            stamp, rest = parts[0], "/".join(parts[1:])
            if parts[1] == "pool" and not rest.startswith(LOCAL_POOL + "/"):
                self.send_response(302)
                self.send_header("Location", f"{mirror.rstrip('/')}/{urllib.parse.quote(rest)}")
                self.send_header("Content-Length", "0")
                return self.end_headers()
            if parts[1] == "dists" and SUITE.fullmatch(parts[2]):
                try:
                    freeze(root, stamp, parts[2], mirror)
                except OSError:  # the mirror has no such suite: nothing is frozen
                    return self.send_error(404)
            file = root / rest if rest.startswith(LOCAL_POOL + "/") else root / stamp / rest
            if not file.is_file():
                return self.send_error(404)
            data = file.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)
            return None

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

    return Archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the archive on 127.0.0.1")
    serve.add_argument("--port", type=int, default=8127)
    add = commands.add_parser("bump", help="add a newer version of a package at a timestamp")
    add.add_argument("name")
    add.add_argument("--time", required=True, help="the timestamp to add it at (YYYYMMDDTHHMMSSZ)")
    add.add_argument("--from", dest="start", help="make --time as a copy of this timestamp's indexes first")
    add.add_argument("--suite", default="bookworm")
    add.add_argument("--suffix", default="+rif1")
    for command in (serve, add):
        command.add_argument("--root", type=Path, required=True, help="the archive's folder")
        command.add_argument("--mirror", help="the Debian mirror (default: the host's, from its apt sources)")
    args = parser.parse_args(argv)
    mirror = args.mirror or host_mirror()
    if args.command == "serve":
        try:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler(args.root.resolve(), mirror))
        except OSError as exc:
            raise SystemExit(f"127.0.0.1:{args.port}: {exc.strerror} (another server there? --port)") from None
        print(f"serving http://127.0.0.1:{server.server_address[1]}/ (snapshots of {mirror})", flush=True)
        server.serve_forever()
        return 0
    for stamp in filter(None, (args.time, args.start)):
        if not TIMESTAMP.fullmatch(stamp):
            parser.error(f"{stamp!r} is not a UTC timestamp like 20261101T000000Z")
    print(bump(args.root.resolve(), args.time, args.suite, args.name, args.suffix, mirror, args.start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
