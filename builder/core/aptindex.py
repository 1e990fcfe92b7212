"""An apt archive's package index at one snapshot, and the closure one install step takes from it.

What `apt-get install --no-install-recommends` would install, worked out from the archive's Packages indexes alone
(python-debian parses them and compares versions), so `builder lock` needs no engine: every Depends and Pre-Depends,
the newest version of every suite (apt's choice at equal priority), the first alternative that can be had
(apt's), a virtual package through its first provider. What the base image already has is not installed again:
the packages every debootstrap base holds (Essential or Priority: required) and what the steps below put there.

It is the apt OS family's package index (osfamilies.apt.PACKAGE_INDEX): `builder lock` asks the family for it and
hands it the fetch, so this module reads no network itself. An index is hostile input: the fetch the lock passes
(builder.render.aptfetch) downloads it through the registry transport's bounded reader (its compressed size capped,
one deadline for the whole download) and unpacks it as a stream with its unpacked size capped (a bomb costs at most
aptfetch.MAX_INDEX_BYTES); here its stanzas are counted (MAX_STANZAS), every field this module uses is checked
against Debian's grammar (builder.core.aptwords) before it is used, and a closure is capped at the lock's pin count.
Corrupt data (a bad xz or gzip stream, a Version that is no version) is one ArchiveError naming the index;
python-debian's warnings (an unparseable relation) are caught, never printed raw, and make the relation an error.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from debian import deb822
from debian.debian_support import version_compare

from builder.core import aptwords
from builder.core.ospins import MAX_PINS, Package, Source
from builder.core.text import printable

__all__ = ["ArchiveError", "Index", "Unreachable", "forget", "load"]

ARCHES = ("amd64", "all")
# Debian bookworm's main/binary-amd64 index (deb.debian.org, 2026-11-28): 63,440 stanzas (python-debian parses it
# in about 8 s here): room for a larger archive (Ubuntu's universe), not for a flood.
MAX_STANZAS = 200_000
_STANZA = re.compile(r"^Package:", re.MULTILINE)
Fetch = Callable[[str], str]  # an index folder's URL -> the text of its Packages index, read bounded


class ArchiveError(RuntimeError):
    """The archive cannot be read, or a package or dependency is not in it."""


class Unreachable(ArchiveError):
    """The archive's host does not answer (no name, no route, refused, no complete answer in time)."""


@dataclass(frozen=True)
class Candidate:
    name: str
    version: str
    arch: str
    sha256: str
    depends: str
    provides: tuple[str, ...]
    base: bool  # Essential or Priority: required: in every debootstrap base
    where: str = field(default="", compare=False)  # the index it came from (for errors: not what it is)


_CAUGHT = threading.local()


class _Catch(logging.Filter):
    """python-debian's log lines (an unparseable relation quotes the raw field, terminal escapes and all): caught
    where a parse is watched (each one makes it an error), else printed escaped, never raw."""

    def filter(self, record: logging.LogRecord) -> bool:
        found: list[str] | None = getattr(_CAUGHT, "lines", None)
        text = printable(record.getMessage())[:300]
        if found is not None:
            found.append(text)
            return False
        record.msg, record.args = text, None
        return True


logging.getLogger("debian").addFilter(_Catch())
logging.getLogger("debian.deb822").addFilter(_Catch())


@contextmanager
def _watched() -> Iterator[list[str]]:
    kept = getattr(_CAUGHT, "lines", None)
    found: list[str] = []
    _CAUGHT.lines = found
    try:
        yield found
    finally:
        _CAUGHT.lines = kept


def _relations(text: str, what: str) -> list[list[deb822.PkgRelation.ParsedRelation]]:
    """A Depends or Provides field parsed, every name and version in Debian's grammar; else an ArchiveError."""
    with _watched() as warned:
        groups = deb822.PkgRelation.parse_relations(text) if text else []
    if warned:
        raise ArchiveError(f"{what}: cannot be parsed: {warned[0]}")
    for group in groups:
        for relation in group:
            name, version = str(relation["name"]), relation["version"]
            if not aptwords.is_name(name):
                raise ArchiveError(f"{what}: {printable(aptwords.shown(name))} is no package name")
            if version is not None and not aptwords.is_version(str(version[1])):
                raise ArchiveError(f"{what}: {printable(aptwords.shown(str(version[1])))} is no version")
    return groups


def _field(paragraph: deb822.Packages, key: str, where: str, check: Callable[[str], bool]) -> str:
    value = str(paragraph.get(key, ""))
    if not check(value):
        name = printable(aptwords.shown(str(paragraph.get("Package", ""))))
        raise ArchiveError(f"{where}: package {name}: {key} {printable(aptwords.shown(value))} is not Debian's "
                           "grammar (Policy 5.6)")
    return value


@dataclass
class Index:
    """The newest candidate per package name, and who provides each virtual name."""

    packages: dict[str, Candidate] = field(default_factory=dict)
    providers: dict[str, list[str]] = field(default_factory=dict)
    stanzas: int = 0

    def add(self, paragraphs: Iterable[deb822.Packages], where: str = "the index") -> None:
        """Every stanza of one index (counted: MAX_STANZAS in all); one that breaks the grammar is an ArchiveError
        naming the index, before anything of it is used."""
        for p in paragraphs:
            self.stanzas += 1
            if self.stanzas > MAX_STANZAS:
                raise ArchiveError(f"{where}: more than {MAX_STANZAS} stanzas: refused")
            if p.get("Architecture") not in ARCHES:
                continue
            name = _field(p, "Package", where, aptwords.is_name)
            version = _field(p, "Version", where, aptwords.is_version)
            sha = _field(p, "SHA256", where, lambda v: not v or aptwords.SHA256.fullmatch(v) is not None)
            old = self.packages.get(name)
            if old is not None and version_compare(old.version, version) >= 0:
                continue
            what = f"{where}: {name} {version}"
            provides = tuple(str(r[0]["name"]) for r in _relations(str(p.get("Provides", "")), f"{what}: Provides"))
            depends = ", ".join(filter(None, [str(p.get("Pre-Depends", "")), str(p.get("Depends", ""))]))
            self.packages[name] = Candidate(name, version, str(p["Architecture"]), sha, depends, provides,
                                            p.get("Essential") == "yes" or p.get("Priority") == "required", where)
            for virtual in provides:
                self.providers.setdefault(virtual, []).append(name)

    def base_set(self) -> set[str]:
        return {c.name for c in self.packages.values() if c.base}

    def closure(self, wants: Iterable[str], present: set[str]) -> list[Package]:
        """The packages installing `wants` adds over `present` (names), each at the version the archive offers;
        more than a lock's MAX_PINS is an ArchiveError before any lock is written."""
        chosen: dict[str, Candidate] = {}
        todo = list(wants)
        for want in todo:
            if want not in self.packages:
                raise ArchiveError(f"{want if aptwords.is_name(want) else printable(aptwords.shown(want))}: not in "
                                   "the archive")
        while todo:
            name = todo.pop(0)
            if name in chosen or name in present:
                continue
            candidate = self.packages[name]
            chosen[name] = candidate
            if len(chosen) > MAX_PINS:
                raise ArchiveError(f"{candidate.where}: installing {' '.join(wants)} takes more than {MAX_PINS} "
                                   "packages, more than a lock may pin: refused")
            what = f"{candidate.where}: {name} {candidate.version}: Depends"
            for group in _relations(candidate.depends, what):
                pick = self._satisfy(group, chosen, present)
                if pick is None:
                    alternatives = " | ".join(a["name"] for a in group)
                    raise ArchiveError(f"{name} {candidate.version} depends on {alternatives}: not in the archive")
                if pick:
                    todo.append(pick)
        return [Package(c.name, c.arch, c.version, c.sha256) for c in chosen.values()]

    def _satisfy(self, group: list[deb822.PkgRelation.ParsedRelation], chosen: dict[str, Candidate],
                 present: set[str]) -> str | None:
        """'' when the group is met already, else the package to add (None: nothing in the archive meets it)."""
        names = [str(a["name"]) for a in group]
        if any(n in present or n in chosen or any(p in chosen or p in present for p in self.providers.get(n, []))
               for n in names):
            return ""
        for alternative in group:
            name = str(alternative["name"])
            if name in self.packages and _meets(self.packages[name].version, alternative["version"]):
                return name
            providers = self.providers.get(name, [])
            if providers and alternative["version"] is None:
                return providers[0]
        return None


def _meets(version: str, relation: object) -> bool:
    if not isinstance(relation, tuple):
        return True
    op, wanted = relation
    cmp = version_compare(version, wanted)
    return {"<<": cmp < 0, "<=": cmp <= 0, "=": cmp == 0, ">=": cmp >= 0, ">>": cmp > 0}[op]


KEPT_INDEXES = 8  # a lock refresh reads a few OSes' suites: the last ones loaded are kept for the next combination
_LOADED: OrderedDict[tuple[tuple[Source, ...], str], Index] = OrderedDict()
_LOADING = threading.Lock()


def load(sources: Iterable[Source], fetch: Fetch, arch: str = "amd64") -> Index:
    """Every suite and component of the sources, merged (the newest version of each package wins), each index read
    with fetch. Read once per process for the same sources (a snapshot never changes): `builder lock` of every
    combination fetches and parses each OS's indexes once, so its cost grows with the OSes, not with the fleet of
    combinations."""
    key = (tuple(sources), arch)
    with _LOADING:  # combinations are locked concurrently (lock --jobs): one of them reads, the others wait for it
        found = _LOADED.get(key)
        if found is None:
            found = _LOADED[key] = _read(key[0], arch, fetch)
            while len(_LOADED) > KEPT_INDEXES:
                _LOADED.popitem(last=False)
        _LOADED.move_to_end(key)
    return found


def forget() -> None:
    """Drop the indexes read so far: for a mirror that changed under its URL (a test's archive; never a snapshot)."""
    with _LOADING:
        _LOADED.clear()


def _read(sources: tuple[Source, ...], arch: str, fetch: Fetch) -> Index:
    index = Index()
    for source in sources:
        for component in source.components:
            folder = f"{source.url}dists/{source.suite}/{component}/binary-{arch}/"
            text = fetch(folder)
            if len(_STANZA.findall(text)) + index.stanzas > MAX_STANZAS:  # counted before python-debian's parse
                raise ArchiveError(f"{folder}: more than {MAX_STANZAS} stanzas: refused")
            with _watched() as warned:
                index.add(deb822.Packages.iter_paragraphs(text.splitlines(keepends=True), use_apt_pkg=False), folder)
            if warned:
                raise ArchiveError(f"{folder}: {warned[0]}")
    return index
