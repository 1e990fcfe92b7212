"""A combination's OS package locks: which apt steps it has, the snapshot they read, and their closures.

Three steps install OS packages: the base's runtime and venv packages (`os-base.txt`), where the combination
has a devel image, its toolchain (`os-devel.txt`, over what the base step leaves: its runtime packages), and where
that devel image adds the ROCm SDK from AMD's apt repository, the SDK step (`os-sdk.txt`: curl, gnupg and AMD's
SDK packages, over both, from the snapshot and AMD's repository of the ROCm release, checked with AMD's key). `builder
lock` resolves each against the OS's archive at one snapshot timestamp (builder/data/os.yaml, or one mirror for
every OS: --apt-snapshot / RIF_APT_SNAPSHOT) and writes its lock; a render reads them back. The snapshot is kept
until `--update` moves it to now (or to --apt-snapshot-time / RIF_APT_SNAPSHOT_TIME). The index a step resolves
against is the OS family's (`PACKAGE_INDEX`), read with the bounded fetch of builder.render.aptfetch; a family
without one has no OS step to lock.

Whom apt trusts unsigned is the command line's to say (RIF_APT_SNAPSHOT_TRUSTED=yes, for a loopback mirror only),
never a lock's: a lock's `trusted: yes` is honoured only where the command allows it too (read_group narrows).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from builder.core import aptwords, ospins, safefs
from builder.core.errors import InputError, usage_error
from builder.core.osfamilies.base import PackageIndex
from builder.core.spec import CellSpec
from builder.render import aptfetch
from builder.render.installs import devel_packages, os_sdk_source, runtime_packages, venv_packages

BASE_STEP = "os-base.txt"
DEVEL_STEP = "os-devel.txt"
SDK_STEP = "os-sdk.txt"
URL_ENV = "RIF_APT_SNAPSHOT"  # one archive for every OS: an air-gapped site's mirror, a test's loopback archive
TIME_ENV = "RIF_APT_SNAPSHOT_TIME"
TRUSTED_ENV = aptwords.TRUST_SETTING  # yes: the (loopback) mirror is unsigned and trusted as it is (a test's)
OFF = "off"


@dataclass(frozen=True)
class OsStep:
    file: str
    wants: tuple[str, ...]
    over: tuple[str, ...] = ()  # packages a step below installed and kept: not installed again
    extra: tuple[ospins.Source, ...] = ()  # sources beside the snapshot's (AMD's repository of one release)


@dataclass(frozen=True)
class Snapshot:
    """Where and when OS packages are pinned from: a mirror for every OS (else the data's), and the timestamp."""

    url: str | None = None
    time: str | None = None
    trusted: bool = False

    def __post_init__(self) -> None:
        if self.trusted and (self.url is None or not aptwords.is_loopback_url(self.url)):
            raise ValueError("an unsigned archive is trusted only on this machine's loopback")

    @classmethod
    def from_options(cls, url: str | None, time: str | None, trusted: str | None) -> Snapshot | None:
        """--apt-snapshot, --apt-snapshot-time and RIF_APT_SNAPSHOT_TRUSTED as the command line gives them (None:
        not given), parsed; None for `off`. A usage error (InputError) names the option and cuts the value."""
        if url == OFF:
            return None
        try:
            url = aptwords.archive_url(url) if url is not None else None
        except ValueError as exc:
            raise usage_error("--apt-snapshot", f"snapshot archive: {exc}") from None
        try:
            time = aptwords.utc_time(time).strftime("%Y%m%dT%H%M%SZ") if time is not None else None
        except ValueError as exc:
            raise usage_error("--apt-snapshot-time", f"snapshot time {exc}") from None
        try:
            unsigned = aptwords.trust_setting(trusted)
        except ValueError as exc:
            raise usage_error(TRUSTED_ENV, str(exc)) from None
        if unsigned and (url is None or not aptwords.is_loopback_url(url)):
            raise usage_error(TRUSTED_ENV, f"{TRUSTED_ENV}=yes trusts a loopback archive only (http://127.0.0.1:PORT "
                                           "from scripts/apt_snapshot_archive.py), not "
                                           f"{aptwords.shown(url) if url else 'the OS snapshot service'}: refused")
        return cls(url, time, unsigned)

    def sources(self, cell: CellSpec, time: str) -> tuple[ospins.Source, ...]:
        release = cell.os_release
        if self.url is not None:
            return (ospins.Source(f"{self.url.rstrip('/')}/{time}/", release.codename, ("main",)),)
        return tuple(ospins.Source(f"{s.archive.rstrip('/')}/{time}/", suite, s.components)
                     for s in release.snapshot for suite in s.suites)


def steps(members: list[CellSpec]) -> list[OsStep]:
    """The OS package steps of a combination's Dockerfile, none where its OS has no snapshot archive in the data or
    its family no package index to resolve them against."""
    first = members[0]
    if not first.os_release.snapshot or first.os_family.PACKAGE_INDEX is None:
        return []
    runtime = tuple(runtime_packages(first))
    found = [OsStep(BASE_STEP, runtime + tuple(venv_packages(first)))]
    if any(c.flavor == "devel" for c in members):
        found.append(OsStep(DEVEL_STEP, tuple(devel_packages(first)), over=runtime))
    sdk = next((s for s in map(os_sdk_source, (c for c in members if c.flavor == "devel")) if s is not None), None)
    family_sdk = first.os_family.SDK  # not None where os_sdk_source found AMD's repository
    if sdk is not None and family_sdk is not None:
        found.append(OsStep(SDK_STEP, family_sdk.packages(), over=runtime + tuple(devel_packages(first)),
                            extra=(sdk,)))
    return found


def lock_group(members: list[CellSpec], lock_dir: Path, snapshot: Snapshot, update: bool) -> dict[str, str]:
    """file -> the text of each OS step's lock, resolved again where missing, stale or updated (else kept). Each
    step resolves against the package index its OS family reads (PACKAGE_INDEX) with aptfetch's bounded fetch."""
    cell = members[0]
    reader = cell.os_family.PACKAGE_INDEX
    if reader is None:
        return {}  # no index to resolve against: no OS step (steps() has none)
    old = {s.file: _old(lock_dir / s.file) for s in steps(members)}
    kept_time = next((o.snapshot for o in old.values() if o is not None), None)
    time = snapshot.time or (None if update else kept_time) or now()
    texts: dict[str, str] = {}
    indexes: dict[tuple[ospins.Source, ...], PackageIndex] = {}
    for step in steps(members):
        current = old[step.file]
        sources = snapshot.sources(cell, time) + step.extra
        if (current is not None and not update and current.snapshot == time and current.wants == step.wants
                and current.os == cell.os and current.sources == sources and current.trusted == snapshot.trusted):
            texts[step.file] = current.text()
            continue
        index = indexes[sources] = indexes.get(sources) or reader(sources, aptfetch.fetch)
        present = index.base_set()
        if step.over:
            present |= {p.name for p in index.closure(step.over, present)}
        packages = tuple(index.closure(step.wants, present))
        if (current is not None and current.wants == step.wants and set(current.packages) == set(packages)
                and set(step.extra) <= set(current.sources) and current.trusted == snapshot.trusted):
            texts[step.file] = current.text()  # the archive moved, this closure did not: the lock stays as it is
            continue
        texts[step.file] = ospins.OsLock(cell.os, step.wants, time, sources, packages, snapshot.trusted).text()
    return texts


def unreachable(cell: CellSpec, snapshot: Snapshot, exc: Exception) -> str:
    """What `builder lock` says when the snapshot service cannot be reached: which service, for which OS, and the
    three ways on (an air-gapped site's usual first run)."""
    service = snapshot.url or ", ".join(s.archive for s in cell.os_release.snapshot)
    return (f"the OS snapshot service {service} cannot be reached to pin {cell.os}'s OS packages ({exc}). Three ways "
            "on: --apt-snapshot URL, a snapshot mirror you can reach (read as URL/<timestamp>/dists/<codename>/main/); "
            "a local archive made with scripts/apt_snapshot_archive.py (--apt-snapshot http://127.0.0.1:PORT, with "
            f"{TRUSTED_ENV}=yes); or --apt-snapshot off to leave OS packages unpinned")


def now() -> str:
    """The snapshot `--update` moves to when no time is given: this second, in UTC."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _old(path: Path) -> ospins.OsLock | None:
    try:
        return ospins.read(path)
    except InputError:
        return None


def read_group(lock_dir: Path, members: list[CellSpec]) -> dict[str, ospins.OsLock]:
    """The OS locks a locked render installs from (a missing one leaves that step unpinned, warned about); one that
    does not parse, or was resolved for other packages, is an error naming it."""
    found = {}
    for step in steps(members):
        path = lock_dir / step.file
        if not path.exists() and not path.is_symlink():
            continue
        lock = ospins.read(path)
        if lock.wants != step.wants or lock.os != members[0].os:
            raise ospins.stale(path, f"resolved for {lock.os}: {' '.join(lock.wants)}; the matrix now asks for "
                                     f"{members[0].os}: {' '.join(step.wants)} (run `builder lock`)")
        missing = [s for s in step.extra if s not in lock.sources]
        if missing:
            raise ospins.stale(path, f"resolved without {missing[0].url} {missing[0].suite}, which the matrix now "
                                     "installs from (run `builder lock`)")
        found[step.file] = lock
    return found


def narrowed(locks: dict[str, ospins.OsLock], trusted: bool) -> dict[str, ospins.OsLock]:
    """The locks as apt reads them: a lock's `trusted: yes` stands only where the person running the command
    allows it too (trusted: RIF_APT_SNAPSHOT_TRUSTED=yes): a lock, or a lock record from a registry, narrows what
    the command allows, never widens it (and no lock trusts an archive off the loopback: ospins refuses it)."""
    return {name: replace(lock, trusted=lock.trusted and trusted) for name, lock in locks.items()}


def write(tree: Path, rel: str, text: str) -> bool:
    """Write a lock file when its text changed; whether it did."""
    path = tree / rel
    try:
        if safefs.read_regular(path, ospins.MAX_BYTES).decode("utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    safefs.write_inside(tree, rel, text.encode())
    return True
