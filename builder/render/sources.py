"""Where pip takes wheels from: the cell's index URL or a local wheelhouse, its mounts, and each locked step's wheels.

A local wheelhouse (air-gapped sites, tests) is bind-mounted read-only, never copied into a layer; the pip
cache is a cache mount either way, and a step's lock file is read from inside it, so neither is ever in a layer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from builder.core import wheels
from builder.core.spec import CellSpec
from builder.render import installs

PIP_CACHE_ID = "rif-pip"  # BuildKit's cache mount of pip's downloads (builder.pipeline.byfamily prunes it)
PIP_CACHE = f"--mount=type=cache,id={PIP_CACHE_ID},target=/tmp"  # pip --cache-dir /tmp/pip
WHEELS_DIR = "wheels"  # a local wheelhouse, linked into the build tree and bind-mounted, never copied
WHEELS_MOUNT = "/mnt"  # where the build sees it: a folder every base image has, so no mount point is left
LOCK_MOUNT = "/tmp/rif/requirements.txt"  # a step's lock file, inside the pip cache mount: never in a layer


@dataclass(frozen=True)
class WheelSource:
    """Where pip takes wheels from (the cell's index URL, or a local wheelhouse for air-gapped sites and tests)
    and, when locked, the tree whose `<combination>/lock/` files pin the base image and every wheel."""

    wheelhouse: Path | None = None
    locks: Path | None = None
    # The person running the command lets apt read a lock's loopback archive unsigned (RIF_APT_SNAPSHOT_TRUSTED=yes,
    # read by the command line): a lock that says `trusted: yes` is trusted only where this says so too.
    apt_trusted: bool = False

    def pip_args(self, cell: CellSpec) -> list[str]:
        if self.wheelhouse is not None:
            return ["--no-index", "--find-links", WHEELS_MOUNT]
        url = urlsplit(cell.index_url)
        # pip ignores a plain-HTTP index unless told to trust it: a matrix that names one (a mirror inside
        # the site's network) means it.
        trust = ["--trusted-host", url.hostname] if url.scheme == "http" and url.hostname else []
        return ["--index-url", cell.index_url, *trust]

    def mounts(self, folder: str = WHEELS_DIR) -> list[str]:
        """The pip cache is a cache mount either way; a wheelhouse comes in read-only by a bind mount of the
        folder of the build tree that holds the combination's wheels (pinned_wheels)."""
        bind = [f"--mount=type=bind,source={folder},target={WHEELS_MOUNT}"] if self.wheelhouse else []
        return [PIP_CACHE, *bind]

    def describe(self, cell: CellSpec) -> str:
        where = "local wheelhouse (--wheelhouse)" if self.wheelhouse else cell.index_url
        return where + (", exactly the wheels of lock/ (--require-hashes)" if self.locks else "")


INDEX = WheelSource()  # the cell's own index URL, unlocked: what a render uses unless told otherwise


def step_wheels(lock_text: str) -> str:
    """A locked step's own wheels in the build tree (a wheelhouse build): the folder its bind mount reads, named
    by its lock, so a new wheel elsewhere in the wheelhouse leaves BuildKit's cache of this step untouched."""
    return f"{WHEELS_DIR}/{hashlib.sha256(lock_text.encode()).hexdigest()[:12]}"


Pins = tuple[tuple[str, tuple[str, ...]], ...]  # (normalized name, the versions pinned with ==), sorted


def combination_pins(cells: Iterable[CellSpec]) -> Pins:
    """The versions the combination's requirements pin exactly (torch and its companions), per distribution."""
    pinned: dict[str, set[str]] = {}
    for cell in cells:
        for text in installs.requirements(cell):
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            exact = [spec.version for spec in requirement.specifier if spec.operator == "=="]
            if len(exact) == 1 and "*" not in exact[0]:
                pinned.setdefault(canonicalize_name(requirement.name), set()).add(exact[0])
    return tuple((name, tuple(sorted(versions))) for name, versions in sorted(pinned.items()))


def pinned_wheels(pins: Pins) -> str:
    """An unlocked combination's wheels in the build tree (a wheelhouse build): the folder its bind mount reads,
    named by its pins. It holds every wheel but other versions of what the combination pins exactly (pip would
    never pick those), so a new torch for another combination leaves this one's pip steps cached in BuildKit and
    its content hash unchanged."""
    text = "".join(f"\n{name}=={version}" for name, versions in pins for version in versions)
    return f"{WHEELS_DIR}/{hashlib.sha256(('unlocked' + text).encode()).hexdigest()[:12]}"


def usable(wheel: wheels.Wheel, pins: Pins) -> bool:
    """Whether pip could install the wheel for a combination with these pins: any wheel of a distribution it does
    not pin, and of one it pins, a version an `==` pin matches (PEP 440: `==2.13.0` matches 2.13.0+cpu)."""
    versions = dict(pins).get(wheel.name)
    if versions is None:
        return True
    try:
        return any(SpecifierSet(f"=={v}").contains(wheel.version, prereleases=True) for v in versions)
    except InvalidSpecifier:
        return True
