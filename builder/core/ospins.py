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
`signed-by=/KEYRING`, the key apt checks it with), `trusted: yes` says the lock was made from an unsigned loopback
archive (a test's), and each `pin` is one package of the step's closure. Reading is bounded (the file, each line,
each value: builder.core.aptwords) and names the file and line of the first thing that does not fit.

`trusted` is never a decision: a lock that says it for a source off this machine's loopback is refused (TrustError),
and where a lock says it, apt skips signatures only when the person running the command allows it too (the render
narrows the lock: oslock.read_group).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from builder.core import aptwords, safefs
from builder.core.aptwords import shown
from builder.core.errors import InputError, Problem

MAGIC = "# rif-os-lock 1"
MAX_BYTES = 2 << 20  # a closure of a few hundred packages is tens of KB
MAX_PINS = 5000
MAX_LINE = 4096  # a pin is a few hundred characters at most (aptwords' caps), a source line an URL and its suite
TIMESTAMP = aptwords.TIMESTAMP
_NAME = r"[a-z0-9][a-z0-9+.-]*"
_OS = re.compile(r"[a-z0-9][a-z0-9.-]*", re.ASCII)
_PIN = re.compile(rf"({_NAME}):([a-z0-9-]+)=([0-9][A-Za-z0-9.+~:-]*) ([0-9a-f]+|-)", re.ASCII)
# A source's URL goes into the Dockerfile's apt sources (inside a shell word): a host, then a path of the characters
# an archive's address needs, never a quote, space, `$` or backquote (a lock record from a registry is hostile).
_URL = r"https?://[A-Za-z0-9.\-\[\]:]+/(?:[A-Za-z0-9._~%+\-]+/)*"
_SOURCE = re.compile(rf"({_URL}) ([A-Za-z0-9._/-]+)((?: [A-Za-z0-9._-]+)+)(?: signed-by=(/[A-Za-z0-9._/-]+))?",
                     re.ASCII)
_KEYS = ("os", "for", "snapshot", "trusted")


class TrustError(InputError):
    """A lock that says apt may install without signatures from an archive off this machine's loopback."""


@dataclass(frozen=True)
class Package:
    name: str
    arch: str
    version: str
    sha256: str = ""  # of the .deb, where the archive's index gives one

    def __post_init__(self) -> None:
        """Nothing that is not Debian's grammar is ever pinned, used or written (a ValueError saying which)."""
        if not aptwords.is_name(self.name):
            raise ValueError(f"package name {shown(self.name)} is not Debian's grammar (Policy 5.6.7)")
        if not aptwords.is_arch(self.arch):
            raise ValueError(f"{self.name}: architecture {shown(self.arch)} is not `[a-z0-9-]+`")
        if not aptwords.is_version(self.version):
            raise ValueError(f"{self.name}: version {shown(self.version)} is not Debian's grammar (Policy 5.6.12)")
        if self.sha256 and not aptwords.SHA256.fullmatch(self.sha256):
            raise ValueError(f"{self.name}: sha256 {shown(self.sha256)} is not 64 hex digits")

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

    @property
    def unsigned_off_loopback(self) -> bool:
        """A source apt would read without a key of its own from somewhere other than this machine."""
        return not self.signed_by and not aptwords.is_loopback_url(self.url)


@dataclass(frozen=True)
class OsLock:
    os: str
    wants: tuple[str, ...]
    snapshot: str
    sources: tuple[Source, ...]
    packages: tuple[Package, ...]
    trusted: bool = False

    def __post_init__(self) -> None:
        """No lock trusts an archive off the loopback (a ValueError naming it), whoever made it."""
        off = next((s for s in self.sources if s.unsigned_off_loopback), None)
        if self.trusted and off is not None:
            raise ValueError(f"trusted: yes for {shown(off.url)}, which is not on this machine's loopback: apt "
                             "installs unsigned packages only from a loopback archive")

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
    at: dict[str, int] = {}
    sources: list[tuple[int, Source]] = []
    packages: dict[tuple[str, str], Package] = {}
    for number, line in enumerate(lines[1:], start=2):
        if len(line) > MAX_LINE:
            raise _bad(where, number, "line", f"{len(line):,} characters, over the {MAX_LINE} a lock line may have: "
                                              f"{shown(line)}")
        if line.startswith("#") or not line:
            continue
        key, sep, value = line.partition(": ")
        if not sep:
            raise _bad(where, number, "line", f"expected `KEY: VALUE`, not {shown(line)}")
        if key == "pin":
            package = _pin(value, where, number)
            if (package.name, package.arch) in packages:
                raise _bad(where, number, "pin", f"{package.name}:{package.arch} is pinned twice")
            if len(packages) >= MAX_PINS:
                raise _bad(where, number, "pin", f"more than {MAX_PINS} pins")
            packages[(package.name, package.arch)] = package
        elif key == "source":
            sources.append((number, _source(value, where, number)))
        elif key in _KEYS and key not in fields:
            fields[key], at[key] = value, number
        else:
            raise _bad(where, number, key if re.fullmatch(r"[a-z-]{1,40}", key) else "line",
                       "repeated" if key in _KEYS else f"unknown key {shown(key)} (known: {', '.join(_KEYS)}, "
                                                       "source, pin)")
    return _assemble(fields, at, sources, tuple(packages.values()), where)


def _assemble(fields: dict[str, str], at: dict[str, int], sources: list[tuple[int, Source]],
              packages: tuple[Package, ...], where: Path) -> OsLock:
    missing = [k for k in _KEYS if k not in fields] + ([] if sources else ["source"])
    if missing:
        raise _bad(where, None, missing[0], "missing")
    if not _OS.fullmatch(fields["os"]) or len(fields["os"]) > aptwords.MAX_WORD:
        raise _bad(where, at["os"], "os", f"{shown(fields['os'])} is not an OS name like debian-12")
    try:
        aptwords.utc_time(fields["snapshot"], not_after_now=False)
    except ValueError as exc:
        raise _bad(where, at["snapshot"], "snapshot", str(exc)) from None
    if fields["trusted"] not in ("yes", "no"):
        raise _bad(where, at["trusted"], "trusted", f"must be yes or no, not {shown(fields['trusted'])}")
    off = [(number, s) for number, s in sources if s.unsigned_off_loopback]
    if fields["trusted"] == "yes" and off:
        number, source = off[0]
        raise TrustError([Problem(where, number, "source", f"the lock says `trusted: yes` (line {at['trusted']}) for "
                                  f"{shown(source.url)}, which is not on this machine's loopback: refused (apt "
                                  "installs unsigned packages only from a loopback archive, and only when the "
                                  f"person running the command sets {aptwords.TRUST_SETTING}=yes)")])
    wants = tuple(fields["for"].split())
    if not wants or not all(aptwords.is_name(w) for w in wants):
        raise _bad(where, at["for"], "for", f"must list package names, not {shown(fields['for'])}")
    return OsLock(fields["os"], wants, fields["snapshot"], tuple(s for _, s in sources), packages,
                  fields["trusted"] == "yes")


def _pin(value: str, where: Path, number: int) -> Package:
    match = _PIN.fullmatch(value)
    if not match:
        raise _bad(where, number, "pin", f"{shown(value)} is not `NAME:ARCH=VERSION SHA256` (SHA256 or -)")
    name, arch, version, sha = match.groups()
    try:
        return Package(name, arch, version, "" if sha == "-" else sha)
    except ValueError as exc:
        raise _bad(where, number, "pin", str(exc)) from None


def _source(value: str, where: Path, number: int) -> Source:
    match = _SOURCE.fullmatch(value)
    if not match:
        raise _bad(where, number, "source", f"{shown(value)} is not `URL/ SUITE COMPONENT... [signed-by=/KEYRING]`")
    try:
        aptwords.archive_url(match[1])
    except ValueError as exc:
        raise _bad(where, number, "source", str(exc)) from None
    if any(len(w) > aptwords.MAX_WORD for w in [match[2], *match[3].split()]) or len(match[4] or "") > 256:
        raise _bad(where, number, "source", f"a suite or component over {aptwords.MAX_WORD} characters (or a keyring "
                                            f"over 256): {shown(value)}")
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
