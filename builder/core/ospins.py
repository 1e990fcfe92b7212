"""The OS package lock of one install step: the archive snapshot it reads and every package it installs, exactly.

A file of its own (`<combination>/lock/os-<step>.txt`, written by `builder lock`), in a strict line grammar:

    # rif-os-lock 1
    os: debian-12
    for: python3 ca-certificates
    snapshot: 20261101T000000Z
    trusted: no
    source: https://snapshot.debian.org/archive/debian/20261101T000000Z/ bookworm main
    source: https://repo.radeon.com/rocm/apt/7.2.1/ noble main signed-by=/etc/apt/keyrings/rocm.gpg
    pin: libpython3.11-minimal:amd64=3.11.2-6+deb12u6 <sha256 of the .deb>

`for` is what the step asks for (a lock asked for other packages is stale), `source` lines are the archive at that
snapshot (one per suite; a vendor's repository of one release, such as AMD's, needs no timestamp and ends in
`signed-by=/KEYRING`, the key apt checks it with), `trusted: yes` marks an unsigned mirror the site trusts (a
test's loopback archive), and each `pin` is one package of the step's closure. Reading is bounded and names the
file and line of the first thing that does not fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from builder.core import safefs
from builder.core.errors import InputError, Problem

MAGIC = "# rif-os-lock 1"
MAX_BYTES = 2 << 20  # a closure of a few hundred packages is tens of KB
MAX_PINS = 5000
TIMESTAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_NAME = r"[a-z0-9][a-z0-9+.-]*"
_PIN = re.compile(rf"({_NAME}):([a-z0-9-]+)=([0-9][A-Za-z0-9.+~:-]*) ([0-9a-f]{{64}}|-)")
# A source's URL goes into the Dockerfile's apt sources (inside a shell word): a host, then a path of the characters
# an archive's address needs, never a quote, space, `$` or backquote (a lock record from a registry is hostile).
_URL = r"https?://[A-Za-z0-9.\-\[\]:]+/(?:[A-Za-z0-9._~%+\-]+/)*"
_SOURCE = re.compile(rf"({_URL}) ([A-Za-z0-9._/-]+)((?: [A-Za-z0-9._-]+)+)(?: signed-by=(/[A-Za-z0-9._/-]+))?",
                     re.ASCII)
_KEYS = ("os", "for", "snapshot", "trusted")


@dataclass(frozen=True)
class Package:
    name: str
    arch: str
    version: str
    sha256: str = ""  # of the .deb, where the archive's index gives one

    def line(self) -> str:
        return f"pin: {self.name}:{self.arch}={self.version} {self.sha256 or '-'}\n"


@dataclass(frozen=True)
class Source:
    url: str  # the archive at the snapshot, ending in /
    suite: str
    components: tuple[str, ...]
    signed_by: str = ""  # the keyring (a path in the image) apt checks this source with; '': the lock's trust

    def line(self) -> str:
        signed = f" signed-by={self.signed_by}" if self.signed_by else ""
        return f"source: {self.url} {self.suite} {' '.join(self.components)}{signed}\n"


@dataclass(frozen=True)
class OsLock:
    os: str
    wants: tuple[str, ...]
    snapshot: str
    sources: tuple[Source, ...]
    packages: tuple[Package, ...]
    trusted: bool = False

    def text(self) -> str:
        head = (f"{MAGIC}\n# Written by `builder lock`; refresh with `builder lock --update`, never by hand.\n"
                f"os: {self.os}\nfor: {' '.join(self.wants)}\nsnapshot: {self.snapshot}\n"
                f"trusted: {'yes' if self.trusted else 'no'}\n")
        sources = "".join(s.line() for s in self.sources)
        return head + sources + "".join(p.line() for p in sorted(self.packages, key=lambda p: (p.name, p.arch)))


def parse(text: str, where: Path) -> OsLock:
    """An OsLock from its text, or an InputError naming the file and line of the first line that does not fit."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != MAGIC:
        raise _bad(where, 1, "header", f"the first line must be {MAGIC!r}")
    fields: dict[str, str] = {}
    sources: list[Source] = []
    packages: dict[tuple[str, str], Package] = {}
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith("#") or not line:
            continue
        key, sep, value = line.partition(": ")
        if not sep:
            raise _bad(where, number, "line", "expected `KEY: VALUE`")
        if key == "pin":
            package = _pin(value, where, number)
            if (package.name, package.arch) in packages:
                raise _bad(where, number, "pin", f"{package.name}:{package.arch} is pinned twice")
            if len(packages) >= MAX_PINS:
                raise _bad(where, number, "pin", f"more than {MAX_PINS} pins")
            packages[(package.name, package.arch)] = package
        elif key == "source":
            sources.append(_source(value, where, number))
        elif key in _KEYS and key not in fields:
            fields[key] = value
        else:
            raise _bad(where, number, key, "repeated" if key in _KEYS else f"unknown key (known: {', '.join(_KEYS)}, "
                                                                          "source, pin)")
    return _assemble(fields, sources, tuple(packages.values()), where)


def _assemble(fields: dict[str, str], sources: list[Source], packages: tuple[Package, ...], where: Path) -> OsLock:
    missing = [k for k in _KEYS if k not in fields] + ([] if sources else ["source"])
    if missing:
        raise _bad(where, None, missing[0], "missing")
    if not TIMESTAMP.fullmatch(fields["snapshot"]):
        raise _bad(where, None, "snapshot", f"{fields['snapshot']!r} is not a UTC timestamp like 20261101T000000Z")
    if fields["trusted"] not in ("yes", "no"):
        raise _bad(where, None, "trusted", "must be yes or no")
    wants = tuple(fields["for"].split())
    if not wants or not all(re.fullmatch(_NAME, w) for w in wants):
        raise _bad(where, None, "for", "must list package names")
    return OsLock(fields["os"], wants, fields["snapshot"], tuple(sources), packages, fields["trusted"] == "yes")


def _pin(value: str, where: Path, number: int) -> Package:
    match = _PIN.fullmatch(value)
    if not match:
        raise _bad(where, number, "pin", f"{value[:80]!r} is not `NAME:ARCH=VERSION SHA256` (SHA256 or -)")
    name, arch, version, sha = match.groups()
    return Package(name, arch, version, "" if sha == "-" else sha)


def _source(value: str, where: Path, number: int) -> Source:
    match = _SOURCE.fullmatch(value)
    if not match:
        raise _bad(where, number, "source", f"{value[:80]!r} is not `URL/ SUITE COMPONENT... [signed-by=/KEYRING]`")
    return Source(match[1], match[2], tuple(match[3].split()), match[4] or "")


def _bad(where: Path, line: int | None, key: str, message: str) -> InputError:
    return InputError([Problem(where, line, key, message)])


def read(path: Path) -> OsLock:
    """A lock file from disk: a regular file (never through a link), bounded, UTF-8."""
    try:
        data = safefs.read_regular(path, MAX_BYTES)
    except OSError as exc:
        raise _bad(path, None, "file", f"cannot read: {exc.strerror or exc}") from None
    try:
        return parse(data.decode("utf-8"), path)
    except UnicodeDecodeError:
        raise _bad(path, None, "file", "not UTF-8") from None


def stale(path: Path, message: str) -> InputError:
    """A lock that parses but was resolved for other inputs."""
    return _bad(path, None, "for", message)
