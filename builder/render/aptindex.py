"""An apt archive's package index at one snapshot, and the closure one install step takes from it.

What `apt-get install --no-install-recommends` would install, worked out from the archive's Packages indexes alone
(python-debian parses them and compares versions), so `builder lock` needs no engine: every Depends and Pre-Depends,
the newest version of every suite (apt's choice at equal priority), the first alternative that can be had
(apt's), a virtual package through its first provider. What the base image already has is not installed again:
the packages every debootstrap base holds (Essential or Priority: required) and what the steps below put there.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import threading
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from debian import deb822
from debian.debian_support import version_compare

from builder.core.ospins import Package, Source

ARCHES = ("amd64", "all")
MAX_INDEX_BYTES = 1 << 30  # Debian's main Packages index is about 100 MB unpacked
_COMPRESSED = (("Packages.xz", lzma.decompress), ("Packages.gz", gzip.decompress), ("Packages.bz2", bz2.decompress),
               ("Packages", bytes))


class ArchiveError(RuntimeError):
    """The archive cannot be read, or a package or dependency is not in it."""


@dataclass(frozen=True)
class Candidate:
    name: str
    version: str
    arch: str
    sha256: str
    depends: str
    provides: tuple[str, ...]
    base: bool  # Essential or Priority: required: in every debootstrap base


@dataclass
class Index:
    """The newest candidate per package name, and who provides each virtual name."""

    packages: dict[str, Candidate] = field(default_factory=dict)
    providers: dict[str, list[str]] = field(default_factory=dict)

    def add(self, paragraphs: Iterable[deb822.Packages]) -> None:
        for p in paragraphs:
            if p.get("Architecture") not in ARCHES or "Package" not in p or "Version" not in p:
                continue
            name, version = p["Package"], p["Version"]
            old = self.packages.get(name)
            if old is not None and version_compare(old.version, version) >= 0:
                continue
            provides = tuple(str(r[0]["name"]) for r in p.relations["provides"] or [])
            self.packages[name] = Candidate(
                name, version, p["Architecture"], p.get("SHA256", ""),
                ", ".join(filter(None, [p.get("Pre-Depends", ""), p.get("Depends", "")])), provides,
                p.get("Essential") == "yes" or p.get("Priority") == "required")
            for virtual in provides:
                self.providers.setdefault(virtual, []).append(name)

    def base_set(self) -> set[str]:
        return {c.name for c in self.packages.values() if c.base}

    def closure(self, wants: Iterable[str], present: set[str]) -> list[Package]:
        """The packages installing `wants` adds over `present` (names), each at the version the archive offers."""
        chosen: dict[str, Candidate] = {}
        todo = list(wants)
        for want in todo:
            if want not in self.packages:
                raise ArchiveError(f"{want}: not in the archive")
        while todo:
            name = todo.pop(0)
            if name in chosen or name in present:
                continue
            candidate = self.packages[name]
            chosen[name] = candidate
            for group in deb822.PkgRelation.parse_relations(candidate.depends) if candidate.depends else []:
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


def load(sources: Iterable[Source], arch: str = "amd64") -> Index:
    """Every suite and component of the sources, merged (the newest version of each package wins). Read once per
    process for the same sources (a snapshot never changes): `builder lock` of every combination fetches and parses
    each OS's indexes once, so its cost grows with the OSes, not with the fleet of combinations."""
    key = (tuple(sources), arch)
    with _LOADING:  # combinations are locked concurrently (lock --jobs): one of them reads, the others wait for it
        found = _LOADED.get(key)
        if found is None:
            found = _LOADED[key] = _read(key[0], arch)
            while len(_LOADED) > KEPT_INDEXES:
                _LOADED.popitem(last=False)
        _LOADED.move_to_end(key)
    return found


def forget() -> None:
    """Drop the indexes read so far: for a mirror that changed under its URL (a test's archive; never a snapshot)."""
    with _LOADING:
        _LOADED.clear()


def _read(sources: tuple[Source, ...], arch: str) -> Index:
    index = Index()
    for source in sources:
        for component in source.components:
            text = _fetch(f"{source.url}dists/{source.suite}/{component}/binary-{arch}/")
            index.add(deb822.Packages.iter_paragraphs(text.splitlines(keepends=True), use_apt_pkg=False))
    return index


def _fetch(folder: str) -> str:
    """The folder's Packages index, in the first compression it serves."""
    for name, unpack in _COMPRESSED:
        try:
            with urllib.request.urlopen(folder + name, timeout=60) as response:
                raw = response.read(MAX_INDEX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                continue
            raise ArchiveError(f"{folder}{name}: HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ArchiveError(f"{folder}{name}: {getattr(exc, 'reason', exc)}") from exc
        data = unpack(raw)
        if len(data) > MAX_INDEX_BYTES:
            raise ArchiveError(f"{folder}{name}: larger than {MAX_INDEX_BYTES} bytes")
        return data.decode("utf-8", errors="replace")
    raise ArchiveError(f"{folder}: no Packages index")
